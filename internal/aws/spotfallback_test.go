package aws

import (
	"context"
	"log/slog"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
)

func TestUnattributedUnfulfillableLeavesSpotOutOfTheClaimOnly(t *testing.T) {
	p := &Provider{opts: Options{Now: time.Now, ICETTL: time.Minute}, log: slog.New(slog.DiscardHandler)}
	whole := ec2types.CreateFleetError{ErrorCode: sdkaws.String("UnfulfillableCapacity"), Lifecycle: ec2types.InstanceLifecycleSpot}
	pool := ec2types.CreateFleetError{ErrorCode: sdkaws.String("InsufficientInstanceCapacity"),
		LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{InstanceType: "m5.large"}}}
	claim := &apis.NodeClaim{}
	for _, c := range []struct {
		name string
		errs []ec2types.CreateFleetError
		ct   string
		want bool
	}{
		{"alone", []ec2types.CreateFleetError{whole}, "spot", true},
		{"beside a pool's own error", []ec2types.CreateFleetError{pool, whole}, "spot", false},
		{"on-demand", []ec2types.CreateFleetError{whole}, "on-demand", false},
	} {
		l := &launch{claim: claim}
		if got := p.spotDead(context.Background(), l, c.errs, c.ct); got != c.want || l.noSpot != c.want {
			t.Errorf("%s: fallback %v, want %v", c.name, got, c.want)
		}
		if !p.spotAllowed(&launch{}) {
			t.Errorf("%s: spot blocked for other claims", c.name)
		}
	}
}
