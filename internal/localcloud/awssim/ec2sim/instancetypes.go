package ec2sim

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// DescribeInstanceTypes pages through the catalog's instance types.
func (c *Cloud) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput) (*ec2.DescribeInstanceTypesOutput, error) {
	names := c.cfg.Catalog.TypeNames()
	if len(in.InstanceTypes) > 0 {
		var missing []string
		names = names[:0:0]
		for _, t := range in.InstanceTypes {
			if _, ok := c.cfg.Catalog.Types[string(t)]; !ok {
				missing = append(missing, string(t))
			}
			names = append(names, string(t))
		}
		if len(missing) > 0 {
			return nil, protocol.Errorf("InvalidInstanceType", "The following supplied instance types do not exist: [%s]", strings.Join(missing, ", "))
		}
	}
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 5, 100}, func(yield func(types.InstanceTypeInfo, attrs) bool) {
		for _, n := range names {
			info := c.cfg.Catalog.Types[n]
			if !yield(info, func(name string) ([]string, bool) { return typeAttrs(info, name) }) {
				return
			}
		}
	}, func(items []types.InstanceTypeInfo, next *string) *ec2.DescribeInstanceTypesOutput {
		return &ec2.DescribeInstanceTypesOutput{InstanceTypes: items, NextToken: next}
	})
}

func typeAttrs(info types.InstanceTypeInfo, name string) ([]string, bool) {
	switch name {
	case "instance-type":
		return []string{string(info.InstanceType)}, true
	case "current-generation":
		return []string{fmt.Sprint(aws.ToBool(info.CurrentGeneration))}, true
	case "bare-metal":
		return []string{fmt.Sprint(aws.ToBool(info.BareMetal))}, true
	case "hypervisor":
		return []string{string(info.Hypervisor)}, true
	case "processor-info.supported-architecture":
		var out []string
		if info.ProcessorInfo != nil {
			for _, a := range info.ProcessorInfo.SupportedArchitectures {
				out = append(out, string(a))
			}
		}
		return out, true
	case "supported-usage-class":
		var out []string
		for _, u := range info.SupportedUsageClasses {
			out = append(out, string(u))
		}
		return out, true
	case "vcpu-info.default-vcpus":
		if info.VCpuInfo == nil {
			return nil, true
		}
		return []string{fmt.Sprint(aws.ToInt32(info.VCpuInfo.DefaultVCpus))}, true
	case "memory-info.size-in-mib":
		if info.MemoryInfo == nil {
			return nil, true
		}
		return []string{fmt.Sprint(aws.ToInt64(info.MemoryInfo.SizeInMiB))}, true
	}
	return nil, false
}

// DescribeInstanceTypeOfferings lists where types are offered, by region, zone or zone id.
func (c *Cloud) DescribeInstanceTypeOfferings(_ context.Context, in *ec2.DescribeInstanceTypeOfferingsInput) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	lt := in.LocationType
	if lt == "" {
		lt = types.LocationTypeRegion
	}
	switch lt {
	case types.LocationTypeRegion, types.LocationTypeAvailabilityZone, types.LocationTypeAvailabilityZoneId:
	default:
		return nil, protocol.Errorf("InvalidParameterValue", "Value (%s) for parameter locationType is invalid", lt)
	}
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 5, 1000}, func(yield func(types.InstanceTypeOffering, attrs) bool) {
		for _, name := range c.cfg.Catalog.TypeNames() {
			for _, loc := range c.offeredIn(lt, name) {
				o := types.InstanceTypeOffering{InstanceType: types.InstanceType(name), Location: aws.String(loc), LocationType: lt}
				if !yield(o, valuesOf(map[string][]string{"location": {loc}, "instance-type": {name}})) {
					return
				}
			}
		}
	}, func(items []types.InstanceTypeOffering, next *string) *ec2.DescribeInstanceTypeOfferingsOutput {
		return &ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: items, NextToken: next}
	})
}

// offeredIn lists the locations of one location type a type is offered in.
func (c *Cloud) offeredIn(lt types.LocationType, name string) []string {
	zones := c.cfg.Catalog.Offerings[name]
	switch {
	case lt == types.LocationTypeAvailabilityZone:
		return zones
	case lt == types.LocationTypeAvailabilityZoneId:
		ids := make([]string, len(zones))
		for i, z := range zones {
			ids[i] = c.cfg.Catalog.ZoneID(z)
		}
		return ids
	case len(zones) > 0:
		return []string{c.cfg.Region}
	}
	return nil
}

// DescribeSpotPriceHistory reports the current derived spot price of each
// (type, zone) pool (see SpotPrice); there is no history beyond "now".
func (c *Cloud) DescribeSpotPriceHistory(_ context.Context, in *ec2.DescribeSpotPriceHistoryInput) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	products := in.ProductDescriptions
	if len(products) == 0 {
		products = []string{"Linux/UNIX"}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 1, 1000}, c.spotPrices(in, products),
		func(items []types.SpotPrice, next *string) *ec2.DescribeSpotPriceHistoryOutput {
			return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: items, NextToken: next}
		})
}

// spotPrices yields the prices of the (type, zone, product) pools a
// DescribeSpotPriceHistory call selects, stamped with the current hour.
func (c *Cloud) spotPrices(in *ec2.DescribeSpotPriceHistoryInput, products []string) iter.Seq2[types.SpotPrice, attrs] {
	ts := c.cfg.Now().UTC().Truncate(3600e9)
	return func(yield func(types.SpotPrice, attrs) bool) {
		for _, name := range c.cfg.Catalog.TypeNames() {
			if !listed(in.InstanceTypes, types.InstanceType(name)) {
				continue
			}
			for _, z := range c.cfg.Catalog.Offerings[name] {
				price, ok := c.spotPrice(name, z)
				if az := aws.ToString(in.AvailabilityZone); az != "" && az != z || !ok {
					continue
				}
				for _, prod := range products {
					if prod != "Linux/UNIX" && prod != "Linux/UNIX (Amazon VPC)" {
						continue
					}
					p := fmt.Sprintf("%.6f", price)
					sp := types.SpotPrice{InstanceType: types.InstanceType(name), AvailabilityZone: aws.String(z),
						ProductDescription: types.RIProductDescription(prod), SpotPrice: aws.String(p), Timestamp: aws.Time(ts)}
					if !yield(sp, valuesOf(map[string][]string{"instance-type": {name}, "availability-zone": {z}, "product-description": {prod}, "spot-price": {p}})) {
						return
					}
				}
			}
		}
	}
}
