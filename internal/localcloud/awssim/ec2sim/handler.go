package ec2sim

import (
	"context"
	"net/url"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim/wire"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

//go:generate go run gen_names.go > wire/names_gen.go

type handler func(c *Cloud, ctx context.Context, form url.Values) (any, error)

func op[I, O any](f func(*Cloud, context.Context, *I) (*O, error)) handler {
	return func(c *Cloud, ctx context.Context, form url.Values) (any, error) {
		in := new(I)
		if err := wire.Decode(form, in); err != nil {
			return nil, protocol.Errorf("InvalidParameterValue", "%s", err.Error())
		}
		return f(c, ctx, in)
	}
}

var handlers = map[string]handler{
	"CreateFleet":                   op((*Cloud).CreateFleet),
	"CreateLaunchTemplate":          op((*Cloud).CreateLaunchTemplate),
	"DescribeLaunchTemplates":       op((*Cloud).DescribeLaunchTemplates),
	"DeleteLaunchTemplate":          op((*Cloud).DeleteLaunchTemplate),
	"DescribeInstances":             op((*Cloud).DescribeInstances),
	"DescribeInstanceStatus":        op((*Cloud).DescribeInstanceStatus),
	"TerminateInstances":            op((*Cloud).TerminateInstances),
	"CreateTags":                    op((*Cloud).CreateTags),
	"DescribeSubnets":               op((*Cloud).DescribeSubnets),
	"DescribeSecurityGroups":        op((*Cloud).DescribeSecurityGroups),
	"DescribeImages":                op((*Cloud).DescribeImages),
	"DescribeInstanceTypes":         op((*Cloud).DescribeInstanceTypes),
	"DescribeInstanceTypeOfferings": op((*Cloud).DescribeInstanceTypeOfferings),
	"DescribeSpotPriceHistory":      op((*Cloud).DescribeSpotPriceHistory),
	"DescribeAvailabilityZones":     op((*Cloud).DescribeAvailabilityZones),
	"DescribeCapacityReservations":  op((*Cloud).DescribeCapacityReservations),
	"DescribePlacementGroups":       op((*Cloud).DescribePlacementGroups),
}

// Handle runs one EC2 query-protocol action and returns the SDK output
// struct for wire.EncodeResponse, or an *protocol.APIError.
func (c *Cloud) Handle(ctx context.Context, action string, form url.Values) (any, error) {
	h, ok := handlers[action]
	if !ok {
		return nil, protocol.Errorf("InvalidAction", "The action %s is not valid for this web service.", action)
	}
	if err := c.throttleRequest(action, form); err != nil {
		return nil, err
	}
	return h(c, ctx, form)
}

// Supported reports whether the simulator implements an EC2 action.
func Supported(action string) bool {
	_, ok := handlers[action]
	return ok
}
