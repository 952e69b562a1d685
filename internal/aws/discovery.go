package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
)

// Subnet is a subnet an EC2NodeClass selects.
type Subnet struct {
	ID           string
	Zone         string
	ZoneID       string
	AvailableIPs int32
	Tags         map[string]string
}

// SecurityGroup is a security group an EC2NodeClass selects.
type SecurityGroup struct {
	ID   string
	Name string
}

func tagMap(tags []ec2types.Tag) map[string]string {
	m := make(map[string]string, len(tags))
	for _, t := range tags {
		m[sdkaws.ToString(t.Key)] = sdkaws.ToString(t.Value)
	}
	return m
}

// tagFilters turns a selector's tags into EC2 filters: "*" means "has the
// key"; other values are passed through (EC2 filters accept * wildcards).
func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := slices.Sorted(maps.Keys(tags))
	var out []ec2types.Filter
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: sdkaws.String("tag-key"), Values: []string{k}})
		} else {
			out = append(out, ec2types.Filter{Name: sdkaws.String("tag:" + k), Values: []string{tags[k]}})
		}
	}
	return out
}

// tagsMatch re-checks a selector client-side, so a filter an endpoint ignores
// can never widen a selection. Values use shell-style * and ? wildcards as EC2 does.
func tagsMatch(sel, have map[string]string) bool {
	for k, want := range sel {
		got, ok := have[k]
		if !ok {
			return false
		}
		if want == "*" {
			continue
		}
		if !globMatch(want, got) {
			return false
		}
	}
	return true
}

// selectorKey is a stable cache key for a list of selector terms.
func selectorKey(v any) string {
	b, _ := json.Marshal(v) // selector terms are plain data
	return string(b)
}

// Subnets resolves spec.subnetSelectorTerms (terms ORed; within a term, tags
// and id ANDed). Subnets with no free address are dropped.
func (p *Provider) Subnets(ctx context.Context, nc *apis.EC2NodeClass) ([]Subnet, error) {
	terms := nc.Spec.SubnetSelectorTerms
	if len(terms) == 0 {
		return nil, fmt.Errorf("EC2NodeClass %s: %w: spec.subnetSelectorTerms is empty", nc.Name, ErrNodeClassNotReady)
	}
	return p.subnets.get(ctx, selectorKey(terms), func(ctx context.Context) ([]Subnet, error) {
		all, err := p.describeSelectedSubnets(ctx, nc)
		if err != nil {
			return nil, err
		}
		out := make([]Subnet, 0, len(all))
		for _, s := range all {
			if s.AvailableIPs > 0 {
				out = append(out, s)
			}
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("EC2NodeClass %s: %w: no subnet with free addresses matches spec.subnetSelectorTerms", nc.Name, ErrNodeClassNotReady)
		}
		return out, nil
	})
}

// describeSelectedSubnets lists every available subnet the selectors match,
// exhausted or not, sorted by id.
func (p *Provider) describeSelectedSubnets(ctx context.Context, nc *apis.EC2NodeClass) ([]Subnet, error) {
	terms := nc.Spec.SubnetSelectorTerms
	return unionOfTerms(len(terms), func(s Subnet) string { return s.ID }, func(i int) ([]Subnet, error) {
		term := terms[i]
		in := &ec2.DescribeSubnetsInput{Filters: tagFilters(term.Tags)}
		if term.ID != "" {
			in.SubnetIds = []string{term.ID}
		}
		pager := ec2.NewDescribeSubnetsPaginator(p.clients.EC2, in)
		subnets, err := allPages(ctx, pager.HasMorePages, pager.NextPage, func(out *ec2.DescribeSubnetsOutput) []Subnet {
			return keepMatching(out.Subnets, func(s ec2types.Subnet) (Subnet, bool) {
				sub := Subnet{
					ID: sdkaws.ToString(s.SubnetId), Zone: sdkaws.ToString(s.AvailabilityZone),
					ZoneID: sdkaws.ToString(s.AvailabilityZoneId), AvailableIPs: sdkaws.ToInt32(s.AvailableIpAddressCount),
					Tags: tagMap(s.Tags),
				}
				available := s.State == "" || s.State == ec2types.SubnetStateAvailable
				return sub, available && (term.ID == "" || sub.ID == term.ID) && tagsMatch(term.Tags, sub.Tags)
			})
		})
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: subnetSelectorTerms[%d]: describe subnets: %w", nc.Name, i, err)
		}
		return subnets, nil
	})
}

// unionOfTerms runs one describe per selector term (terms are ORed) and
// returns the union of what they found, by id and sorted by it.
func unionOfTerms[T any](terms int, id func(T) string, describe func(i int) ([]T, error)) ([]T, error) {
	seen := map[string]T{}
	for i := range terms {
		found, err := describe(i)
		if err != nil {
			return nil, err
		}
		for _, x := range found {
			seen[id(x)] = x
		}
	}
	return valuesByKey(seen), nil
}

// keepMatching converts a page of EC2 items and keeps those that match.
func keepMatching[S, T any](in []S, match func(S) (T, bool)) []T {
	var out []T
	for _, s := range in {
		if x, ok := match(s); ok {
			out = append(out, x)
		}
	}
	return out
}

// valuesByKey returns m's values in key order (by id, for subnets and
// security groups keyed by id).
func valuesByKey[T any](m map[string]T) []T {
	out := make([]T, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, m[k])
	}
	return out
}

// ZonalSubnets picks one subnet per zone: the one with the most free
// addresses (ties by id), as Karpenter does.
func ZonalSubnets(subnets []Subnet) map[string]Subnet {
	best := map[string]Subnet{}
	for _, s := range subnets {
		if s.AvailableIPs <= 0 {
			continue
		}
		cur, ok := best[s.Zone]
		if !ok || s.AvailableIPs > cur.AvailableIPs || (s.AvailableIPs == cur.AvailableIPs && s.ID < cur.ID) {
			best[s.Zone] = s
		}
	}
	return best
}

// SecurityGroups resolves spec.securityGroupSelectorTerms (by tags, id or name).
func (p *Provider) SecurityGroups(ctx context.Context, nc *apis.EC2NodeClass) ([]SecurityGroup, error) {
	terms := nc.Spec.SecurityGroupSelectorTerms
	if len(terms) == 0 {
		return nil, fmt.Errorf("EC2NodeClass %s: %w: spec.securityGroupSelectorTerms is empty", nc.Name, ErrNodeClassNotReady)
	}
	return p.groups.get(ctx, selectorKey(terms), func(ctx context.Context) ([]SecurityGroup, error) {
		groups, err := unionOfTerms(len(terms), func(g SecurityGroup) string { return g.ID }, func(i int) ([]SecurityGroup, error) {
			term := terms[i]
			in := &ec2.DescribeSecurityGroupsInput{Filters: tagFilters(term.Tags)}
			if term.ID != "" {
				in.GroupIds = []string{term.ID}
			}
			if term.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: sdkaws.String("group-name"), Values: []string{term.Name}})
			}
			pager := ec2.NewDescribeSecurityGroupsPaginator(p.clients.EC2, in)
			groups, err := allPages(ctx, pager.HasMorePages, pager.NextPage, func(out *ec2.DescribeSecurityGroupsOutput) []SecurityGroup {
				return keepMatching(out.SecurityGroups, func(g ec2types.SecurityGroup) (SecurityGroup, bool) {
					sg := SecurityGroup{ID: sdkaws.ToString(g.GroupId), Name: sdkaws.ToString(g.GroupName)}
					return sg, (term.ID == "" || sg.ID == term.ID) && (term.Name == "" || sg.Name == term.Name) && tagsMatch(term.Tags, tagMap(g.Tags))
				})
			})
			if err != nil {
				return nil, fmt.Errorf("EC2NodeClass %s: securityGroupSelectorTerms[%d]: describe security groups: %w", nc.Name, i, err)
			}
			return groups, nil
		})
		if err != nil {
			return nil, err
		}
		if len(groups) == 0 {
			return nil, fmt.Errorf("EC2NodeClass %s: %w: no security group matches spec.securityGroupSelectorTerms", nc.Name, ErrNodeClassNotReady)
		}
		return groups, nil
	})
}

func securityGroupIDs(groups []SecurityGroup) []string {
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = g.ID
	}
	return ids
}
