package doctor

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// minFreeAddresses: fewer free addresses than this in a class's subnets
// warn (a burst of nodes, each with its pods' addresses under the VPC CNI,
// would exhaust them).
const minFreeAddresses = 32

// checkNodeClass resolves a class's subnets, security groups and AMIs
// exactly as the functions do (internal/aws's discovery, by the selector
// terms: tags such as karpenter.sh/discovery, IDs, names, aliases through
// SSM).
func (e *env) checkNodeClass(ctx context.Context, nc *apis.EC2NodeClass) {
	p := e.aws()
	name := "subnets/" + nc.Name
	if subnets, err := p.Subnets(ctx, nc); err != nil {
		e.fail(name, tagFix("subnet", "subnet-...", firstTags(nc.Spec.SubnetSelectorTerms, func(t apis.SubnetSelectorTerm) map[string]string { return t.Tags })),
			"%v", err)
	} else {
		free, zones := int32(0), map[string]bool{}
		ids := make([]string, 0, len(subnets))
		for _, s := range subnets {
			free += s.AvailableIPs
			zones[s.Zone] = true
			ids = append(ids, s.ID)
		}
		msg := fmt.Sprintf("%d subnet(s) in %s (%s), %d free addresses", len(subnets), strings.Join(slices.Sorted(maps.Keys(zones)), ", "), strings.Join(ids, ", "), free)
		if free < minFreeAddresses {
			e.warn(name, "select larger subnets, or more of them (tag them as the subnetSelectorTerms say)", "%s: fewer than %d", msg, minFreeAddresses)
		} else {
			e.pass(name, "%s", msg)
		}
	}
	name = "security-groups/" + nc.Name
	if groups, err := p.SecurityGroups(ctx, nc); err != nil {
		e.fail(name, tagFix("security-group", "sg-...", firstTags(nc.Spec.SecurityGroupSelectorTerms, func(t apis.SecurityGroupSelectorTerm) map[string]string { return t.Tags })),
			"%v", err)
	} else {
		ids := make([]string, 0, len(groups))
		for _, g := range groups {
			ids = append(ids, g.ID)
		}
		e.pass(name, "%d security group(s): %s", len(groups), strings.Join(ids, ", "))
	}
	e.checkAMIs(ctx, p, nc)
}

func (e *env) checkAMIs(ctx context.Context, p *nwaws.Provider, nc *apis.EC2NodeClass) {
	name := "amis/" + nc.Name
	amis, err := p.AMIs(ctx, nc)
	if err != nil {
		fix := "check amiSelectorTerms: the images must exist in " + e.o.Region + " and be visible to the account"
		if alias := nc.AMIAlias(); alias != "" {
			fix = fmt.Sprintf("alias %s resolves through AWS's public SSM parameters (/aws/service/...) for Kubernetes %s in %s: check the alias and that your credentials may ssm:GetParameter on them",
				alias, e.clusterVersion(), e.o.Region)
		}
		e.fail(name, fix, "%v", err)
		return
	}
	parts := make([]string, 0, len(amis))
	for _, a := range amis {
		kind := a.Architecture
		if len(a.Variants) > 0 {
			kind += " " + strings.Join(a.Variants, "+")
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", a.ID, kind))
	}
	how := "selected"
	if alias := nc.AMIAlias(); alias != "" {
		how = alias + " resolves through SSM to"
	}
	e.pass(name, "%s %s", how, strings.Join(parts, ", "))
}

func (e *env) clusterVersion() string {
	if e.cluster == nil {
		return "(unknown)"
	}
	return str(e.cluster.Version)
}

// firstTags are the tags of the first term that selects by tags.
func firstTags[T any](terms []T, tags func(T) map[string]string) map[string]string {
	for _, t := range terms {
		if m := tags(t); len(m) > 0 {
			return m
		}
	}
	return nil
}

// tagFix tells how to tag resources so the selector finds them.
func tagFix(kind, placeholder string, tags map[string]string) string {
	if len(tags) == 0 {
		return "check the " + kind + " selector terms' IDs and names: nothing in the region matches them"
	}
	var kv []string
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		v := tags[k]
		if v == "*" {
			v = "<any value>"
		}
		kv = append(kv, fmt.Sprintf("Key=%s,Value=%s", k, v))
	}
	return fmt.Sprintf("tag the cluster's %ss as the selector says: aws ec2 create-tags --resources %s --tags %s", kind, placeholder, strings.Join(kv, " "))
}
