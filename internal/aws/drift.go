package aws

import (
	"context"
	"fmt"
	"slices"

	"github.com/nodewright/nodewright/internal/apis"
)

// Drift reasons, as Karpenter names them.
const (
	DriftAMI           = "AMIDrift"
	DriftSubnet        = "SubnetDrift"
	DriftSecurityGroup = "SecurityGroupDrift"
)

// Resolved is what an EC2NodeClass's selectors resolve to right now.
type Resolved struct {
	Subnets        []Subnet
	SecurityGroups []SecurityGroup
	AMIs           []AMI
	Cluster        ClusterInfo
}

// Resolve resolves every selector of nc (through the discovery caches). An
// error wrapping ErrNodeClassNotReady means a selector matches nothing.
func (p *Provider) Resolve(ctx context.Context, nc *apis.EC2NodeClass) (Resolved, error) {
	var r Resolved
	var err error
	if r.Cluster, err = p.Cluster(ctx); err != nil {
		return r, err
	}
	if r.Subnets, err = p.Subnets(ctx, nc); err != nil {
		return r, err
	}
	if r.SecurityGroups, err = p.SecurityGroups(ctx, nc); err != nil {
		return r, err
	}
	if r.AMIs, err = p.AMIs(ctx, nc); err != nil {
		return r, err
	}
	if _, err := p.instanceProfile(nc); err != nil {
		return r, err
	}
	return r, nil
}

// Drift reports why inst no longer matches what nc resolves to ("" when it
// does): its image is not among the EC2NodeClass's AMIs, its subnet is not
// selected any more, or its security groups differ from the selected ones.
// inst must come from DescribeInstances (GetInstance, ListClusterInstances)
// so its security groups are known. An EC2NodeClass that resolves to nothing
// is an error, not drift: replacing nodes then could only fail.
func (p *Provider) Drift(ctx context.Context, nc *apis.EC2NodeClass, inst Instance) (string, error) {
	r, err := p.Resolve(ctx, nc)
	if err != nil {
		return "", fmt.Errorf("drift of instance %s: %w", inst.ID, err)
	}
	if inst.ImageID != "" && !slices.ContainsFunc(r.AMIs, func(a AMI) bool { return a.ID == inst.ImageID }) {
		return DriftAMI, nil
	}
	if inst.SubnetID != "" && !slices.ContainsFunc(r.Subnets, func(s Subnet) bool { return s.ID == inst.SubnetID }) {
		// Exhausted subnets are dropped from discovery but still selected;
		// only a subnet the selectors no longer match is drift.
		selected, err := p.subnetSelected(ctx, nc, inst.SubnetID)
		if err != nil {
			return "", err
		}
		if !selected {
			return DriftSubnet, nil
		}
	}
	if len(inst.SecurityGroupIDs) > 0 && !slices.Equal(inst.SecurityGroupIDs, securityGroupIDs(r.SecurityGroups)) {
		return DriftSecurityGroup, nil
	}
	return "", nil
}

// subnetSelected checks id against the selectors directly, ignoring free addresses.
func (p *Provider) subnetSelected(ctx context.Context, nc *apis.EC2NodeClass, id string) (bool, error) {
	all, err := p.describeSelectedSubnets(ctx, nc)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(all, func(s Subnet) bool { return s.ID == id }), nil
}
