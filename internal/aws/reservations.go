package aws

import (
	"context"
	"fmt"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// CapacityReservations resolves spec.capacityReservationSelectorTerms
// (terms ORed; within a term id, ownerID and tags ANDed) to the active
// reservations they select, sorted by id. It is not cached: available
// counts change with every launch, and a pass asks once per EC2NodeClass.
// A term naming a reservation that does not exist selects nothing.
func (p *Provider) CapacityReservations(ctx context.Context, nc *apis.EC2NodeClass) ([]catalog.Reservation, error) {
	seen := map[string]catalog.Reservation{}
	now := p.opts.Now()
	for i, term := range nc.Spec.CapacityReservationSelectorTerms {
		in := &ec2.DescribeCapacityReservationsInput{Filters: append(tagFilters(term.Tags),
			ec2types.Filter{Name: sdkaws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}})}
		if term.ID != "" {
			in.CapacityReservationIds = []string{term.ID}
		}
		if term.OwnerID != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: sdkaws.String("owner-id"), Values: []string{term.OwnerID}})
		}
		if term.InstanceMatchCriteria != "" {
			in.Filters = append(in.Filters, ec2types.Filter{Name: sdkaws.String("instance-match-criteria"), Values: []string{term.InstanceMatchCriteria}})
		}
		pager := ec2.NewDescribeCapacityReservationsPaginator(p.clients.EC2, in)
		found, err := allPages(ctx, pager.HasMorePages, pager.NextPage, func(out *ec2.DescribeCapacityReservationsOutput) []ec2types.CapacityReservation {
			return out.CapacityReservations
		})
		if err != nil && apiErrorCode(err) == "InvalidCapacityReservationId.NotFound" {
			p.log.WarnContext(ctx, "selected capacity reservation does not exist", "ec2nodeclass", nc.Name, "capacity-reservation-id", term.ID)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass %s: capacityReservationSelectorTerms[%d]: describe capacity reservations: %w", nc.Name, i, err)
		}
		for _, cr := range found {
			r := reservationFromEC2(cr)
			// Re-check what the endpoint filtered, so an ignored filter
			// never widens the selection; an end date already past means
			// EC2 is about to end it.
			if (term.ID != "" && r.ID != term.ID) || (term.OwnerID != "" && r.OwnerID != term.OwnerID) ||
				(term.InstanceMatchCriteria != "" && string(cr.InstanceMatchCriteria) != term.InstanceMatchCriteria) ||
				!tagsMatch(term.Tags, tagMap(cr.Tags)) || cr.State != ec2types.CapacityReservationStateActive ||
				(!r.EndTime.IsZero() && !now.Before(r.EndTime)) {
				continue
			}
			seen[r.ID] = r
		}
	}
	return valuesByKey(seen), nil
}

func reservationFromEC2(cr ec2types.CapacityReservation) catalog.Reservation {
	t := string(cr.ReservationType)
	if t == "" {
		t = catalog.ReservationTypeDefault
	}
	return catalog.Reservation{
		ID: sdkaws.ToString(cr.CapacityReservationId), InstanceType: sdkaws.ToString(cr.InstanceType),
		Zone: sdkaws.ToString(cr.AvailabilityZone), OwnerID: sdkaws.ToString(cr.OwnerId), Type: t,
		Available: int(sdkaws.ToInt32(cr.AvailableInstanceCount)), Interruptible: sdkaws.ToBool(cr.Interruptible),
		EndTime: sdkaws.ToTime(cr.EndDate),
	}
}

// WithReservations returns cat with the capacity reservations of every
// EC2NodeClass of classes that selects some (catalog.WithReservations). A
// class whose reservations cannot be read plans without them (logged): its
// pools still launch spot and on-demand.
func (p *Provider) WithReservations(ctx context.Context, cat *catalog.Catalog, classes []*apis.EC2NodeClass) *catalog.Catalog {
	byClass := map[string][]catalog.Reservation{}
	for _, nc := range classes {
		if nc == nil || len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
			continue
		}
		rs, err := p.CapacityReservations(ctx, nc)
		if err != nil {
			p.log.WarnContext(ctx, "capacity reservations not read; planning without them", "ec2nodeclass", nc.Name, "error", err)
			continue
		}
		byClass[nc.Name] = rs
	}
	if len(byClass) == 0 {
		return cat
	}
	return cat.WithReservations(byClass)
}

// completeReservation fills in what EC2's description of an adopted
// instance lacks about its reservation (whether it is interruptible, when
// a capacity block ends) from the reservations its class selects, so its
// claim carries the labels a fresh launch would have given it. Should the
// reservation not be found, the instance keeps what EC2 said.
func (p *Provider) completeReservation(ctx context.Context, nc *apis.EC2NodeClass, inst *Instance) {
	if inst.Reservation == nil || nc == nil || len(nc.Spec.CapacityReservationSelectorTerms) == 0 {
		return
	}
	rs, err := p.CapacityReservations(ctx, nc)
	if err != nil {
		p.log.WarnContext(ctx, "adopted instance's reservation not read; its labels are EC2's", "instance", inst.ID, "error", err)
		return
	}
	for _, r := range rs {
		if r.ID != inst.Reservation.ReservationID {
			continue
		}
		inst.Reservation.Interruptible = r.Interruptible
		if !r.EndTime.IsZero() {
			end := r.EndTime
			inst.Reservation.ReservationEnd = &end
		}
		return
	}
}
