package ec2sim

import (
	"context"
	"fmt"
	"strconv"
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
	var out []types.InstanceTypeInfo
	for _, n := range names {
		info := c.cfg.Catalog.Types[n]
		if err := appendMatch(&out, in.Filters, func(name string) ([]string, bool) { return typeAttrs(info, name) }, info); err != nil {
			return nil, err
		}
	}
	items, next, err := pageOf(out, in.MaxResults, in.NextToken, 5, 100)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: items, NextToken: next}, nil
}

func typeAttrs(info types.InstanceTypeInfo, name string) ([]string, bool) {
	switch name {
	case "instance-type":
		return []string{string(info.InstanceType)}, true
	case "current-generation":
		return []string{strconv.FormatBool(aws.ToBool(info.CurrentGeneration))}, true
	case "bare-metal":
		return []string{strconv.FormatBool(aws.ToBool(info.BareMetal))}, true
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
	zoneIDs := map[string]string{}
	for _, z := range c.cfg.Catalog.Zones() {
		zoneIDs[z] = c.cfg.Catalog.ZoneID(z)
	}
	var out []types.InstanceTypeOffering
	for _, name := range c.cfg.Catalog.TypeNames() {
		var locs []string
		switch lt {
		case types.LocationTypeRegion:
			if len(c.cfg.Catalog.Offerings[name]) > 0 {
				locs = []string{c.cfg.Region}
			}
		case types.LocationTypeAvailabilityZone:
			locs = c.cfg.Catalog.Offerings[name]
		case types.LocationTypeAvailabilityZoneId:
			for _, z := range c.cfg.Catalog.Offerings[name] {
				locs = append(locs, zoneIDs[z])
			}
		default:
			return nil, protocol.Errorf("InvalidParameterValue", "Value (%s) for parameter locationType is invalid", lt)
		}
		for _, loc := range locs {
			if err := appendMatch(&out, in.Filters, func(f string) ([]string, bool) {
				switch f {
				case "location":
					return []string{loc}, true
				case "instance-type":
					return []string{name}, true
				}
				return nil, false
			}, types.InstanceTypeOffering{InstanceType: types.InstanceType(name), Location: aws.String(loc), LocationType: lt}); err != nil {
				return nil, err
			}
		}
	}
	items, next, err := pageOf(out, in.MaxResults, in.NextToken, 5, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: items, NextToken: next}, nil
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
	ts := c.cfg.Now().UTC().Truncate(3600e9)
	var out []types.SpotPrice
	for _, name := range c.cfg.Catalog.TypeNames() {
		if len(in.InstanceTypes) > 0 && !contains(instanceTypeStrings(in.InstanceTypes), name) {
			continue
		}
		for _, z := range c.cfg.Catalog.Offerings[name] {
			if az := aws.ToString(in.AvailabilityZone); az != "" && az != z {
				continue
			}
			price, ok := c.spotPrice(name, z)
			if !ok {
				continue
			}
			for _, prod := range products {
				if prod != "Linux/UNIX" && prod != "Linux/UNIX (Amazon VPC)" {
					continue
				}
				sp := types.SpotPrice{InstanceType: types.InstanceType(name), AvailabilityZone: aws.String(z),
					ProductDescription: types.RIProductDescription(prod), SpotPrice: aws.String(strconv.FormatFloat(price, 'f', 6, 64)), Timestamp: aws.Time(ts)}
				if err := appendMatch(&out, in.Filters, func(f string) ([]string, bool) {
					switch f {
					case "instance-type":
						return []string{name}, true
					case "availability-zone":
						return []string{z}, true
					case "product-description":
						return []string{prod}, true
					case "spot-price":
						return []string{*sp.SpotPrice}, true
					}
					return nil, false
				}, sp); err != nil {
					return nil, err
				}
			}
		}
	}
	items, next, err := pageOf(out, in.MaxResults, in.NextToken, 1, 1000)
	if err != nil {
		return nil, err
	}
	return &ec2.DescribeSpotPriceHistoryOutput{SpotPriceHistory: items, NextToken: next}, nil
}

func instanceTypeStrings(ts []types.InstanceType) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}
