package aws

import (
	"context"
	"fmt"
	"slices"

	"github.com/nodewright/nodewright/internal/catalog"
)

// PlanLaunch is Launch without its writes (shadow mode): the same
// discovery (cluster, security groups, AMIs, subnets, all reads) and the
// same offering plan, and it answers with the instance CreateFleet would be
// asked for first — the cheapest offering of the capacity type Launch would
// choose — and that offering's price. No launch template is made and no
// CreateFleet called; the instance has no ID.
func (p *Provider) PlanLaunch(ctx context.Context, req LaunchRequest) (Instance, float64, error) {
	if req.NodeClaim == nil || req.NodeClaim.Name == "" || req.NodeClass == nil {
		return Instance{}, 0, fmt.Errorf("plan launch: NodeClaim with a name and its EC2NodeClass are required")
	}
	l, err := p.prepareLaunch(ctx, req)
	if err != nil {
		return Instance{}, 0, fmt.Errorf("plan launch of nodeclaim %s: %w", req.NodeClaim.Name, err)
	}
	subnets, err := p.Subnets(ctx, l.nc)
	if err != nil {
		return Instance{}, 0, fmt.Errorf("plan launch of nodeclaim %s: %w", req.NodeClaim.Name, err)
	}
	zonal := ZonalSubnets(subnets)
	capacityType, opts := p.plan(l.claim, l.types, zonal, l.amis, p.spotAllowed(l))
	var best *option
	var offering catalog.Offering
	for i := range opts {
		if len(opts[i].offerings) == 0 {
			continue
		}
		if o := opts[i].offerings[0]; best == nil || o.Price < offering.Price {
			best, offering = &opts[i], o
		}
	}
	if best == nil {
		return Instance{}, 0, fmt.Errorf("%w: no available offering of %d instance types in zones %v", ErrInsufficientCapacity, len(l.types), zoneNames(zonal))
	}
	inst := Instance{Type: best.it.Name, Zone: offering.Zone, ZoneID: offering.ZoneID, CapacityType: capacityType,
		ImageID: best.ami.ID, State: "planned", NodeClaim: req.NodeClaim.Name, NodePool: req.NodeClaim.NodePoolName()}
	if s, ok := zonal[offering.Zone]; ok {
		inst.SubnetID = s.ID
	}
	inst.SecurityGroupIDs = slices.Sorted(func(yield func(string) bool) {
		for _, g := range l.groups {
			if !yield(g.ID) {
				return
			}
		}
	})
	return inst, offering.Price, nil
}
