package aws

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/nodewright/nodewright/internal/apis"
)

// Drift reasons, as Karpenter names them.
const (
	DriftAMI           = "AMIDrift"
	DriftSubnet        = "SubnetDrift"
	DriftSecurityGroup = "SecurityGroupDrift"
	// DriftCapacityReservation: the instance runs in a reservation its
	// class no longer selects (or that is no longer active).
	DriftCapacityReservation = "CapacityReservationDrift"
	// DriftPlacementGroup: the instance's placement group is not the one
	// its class selects now (a selector added, removed or changed).
	DriftPlacementGroup = "PlacementGroupDrift"
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
// selected any more, its security groups differ from the selected ones, it
// runs in a capacity reservation the class no longer selects, or its
// placement group is not the class's (the checks and their order are
// Karpenter's provider, cloudprovider/drift.go isNodeClassDrifted).
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
	if reason, err := p.reservationDrift(ctx, nc, inst); reason != "" || err != nil {
		return reason, err
	}
	return p.placementGroupDrift(ctx, nc, inst)
}

// reservationDrift: a reserved instance whose reservation is not among the
// active ones its class selects. Karpenter reads the instance afresh here
// because a reservation's instances may fall back to on-demand; inst comes
// from DescribeInstances of this pass, so it is fresh already. Only
// reserved instances ask EC2, and the selection is cached for DiscoveryTTL,
// so a pass does not describe reservations once per node.
func (p *Provider) reservationDrift(ctx context.Context, nc *apis.EC2NodeClass, inst Instance) (string, error) {
	if inst.Reservation == nil || inst.Reservation.ReservationID == "" {
		return "", nil
	}
	ids, err := p.selectedReservationIDs(ctx, nc)
	if err != nil {
		return "", fmt.Errorf("drift of instance %s: %w", inst.ID, err)
	}
	if !slices.Contains(ids, inst.Reservation.ReservationID) {
		return DriftCapacityReservation, nil
	}
	return "", nil
}

func (p *Provider) selectedReservationIDs(ctx context.Context, nc *apis.EC2NodeClass) ([]string, error) {
	key, err := json.Marshal(nc.Spec.CapacityReservationSelectorTerms)
	if err != nil {
		return nil, fmt.Errorf("capacity reservation selector of %s: %w", nc.Name, err)
	}
	return p.reservationIDs.get(ctx, nc.Name+"/"+string(key), func(ctx context.Context) ([]string, error) {
		rs, err := p.CapacityReservations(ctx, nc)
		if err != nil {
			return nil, err
		}
		ids := make([]string, 0, len(rs))
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return ids, nil
	})
}

// placementGroupDrift: the instance's placement group differs from the one
// the class selects now ("" for none on either side). A selector that
// matches no group is an error, not drift (the class is not ready, and a
// replacement could not launch); Karpenter reads that case as "no group".
func (p *Provider) placementGroupDrift(ctx context.Context, nc *apis.EC2NodeClass, inst Instance) (string, error) {
	pg, err := p.PlacementGroup(ctx, nc)
	if err != nil {
		return "", fmt.Errorf("drift of instance %s: %w", inst.ID, err)
	}
	want := ""
	if pg != nil {
		want = pg.ID
	}
	if inst.PlacementGroupID != want {
		return DriftPlacementGroup, nil
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
