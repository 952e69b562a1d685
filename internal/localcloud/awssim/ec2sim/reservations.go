package ec2sim

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Capacity reservations (ODCRs and capacity blocks). An instance launched
// into one takes one of its available slots and gives it back when it
// terminates. A launch template that targets a reservation launches only
// into it: the wrong type or zone, or a full, ended or unknown reservation
// fails that override with EC2's error. An on-demand launch that targets
// none joins a matching open reservation with room, unless its template's
// preference is "none". When a reservation ends (its end date passes, or a
// test ends it), its instances leave it, as EC2's do: a default ODCR's keep
// running as plain on-demand instances; a capacity block's are terminated.

// Reservation describes a capacity reservation a test creates.
type Reservation struct {
	// ID is optional (a cr- id is generated).
	ID           string
	InstanceType string
	Zone         string
	Count        int
	// Open makes instanceMatchCriteria "open" (default "targeted").
	Open bool
	// OwnerID defaults to the region's account.
	OwnerID string
	Tags    map[string]string
	// EndDate, when set, ends the reservation ("expired") once it passes.
	EndDate *time.Time
	// CapacityBlock makes reservationType "capacity-block" (default "default").
	CapacityBlock bool
	Interruptible bool
}

// AddCapacityReservation creates an active reservation and returns its id.
func (c *Cloud) AddCapacityReservation(r Reservation) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	id := r.ID
	if id == "" {
		id = c.newID("cr")
	}
	owner := r.OwnerID
	if owner == "" {
		owner = c.cfg.Account
	}
	match, rtype := types.InstanceMatchCriteriaTargeted, types.CapacityReservationTypeDefault
	if r.Open {
		match = types.InstanceMatchCriteriaOpen
	}
	if r.CapacityBlock {
		rtype = types.CapacityReservationTypeCapacityBlock
	}
	endType := types.EndDateTypeUnlimited
	if r.EndDate != nil {
		endType = types.EndDateTypeLimited
	}
	var tags []types.Tag
	for k, v := range r.Tags {
		tags = append(tags, types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	now := c.cfg.Now().UTC()
	cr := &types.CapacityReservation{
		CapacityReservationId:  aws.String(id),
		CapacityReservationArn: aws.String(c.arn("capacity-reservation", id)),
		OwnerId:                aws.String(owner), InstanceType: aws.String(r.InstanceType),
		AvailabilityZone: aws.String(r.Zone), AvailabilityZoneId: aws.String(c.cfg.Catalog.ZoneID(r.Zone)),
		TotalInstanceCount: aws.Int32(int32(r.Count)), AvailableInstanceCount: aws.Int32(int32(r.Count)),
		InstanceMatchCriteria: match, ReservationType: rtype, State: types.CapacityReservationStateActive,
		InstancePlatform: types.CapacityReservationInstancePlatformLinuxUnix, Tenancy: types.CapacityReservationTenancyDefault,
		EndDate: r.EndDate, EndDateType: endType, StartDate: aws.Time(now), CreateDate: aws.Time(now),
		Interruptible: aws.Bool(r.Interruptible), Tags: tags,
	}
	c.reservations[id] = cr
	c.resOrder = append(c.resOrder, id)
	return id
}

// EndCapacityReservation ends a reservation now, as its expiry
// (state "expired") or a cancellation ("cancelled") does.
func (c *Cloud) EndCapacityReservation(id string, st types.CapacityReservationState) error {
	c.mu.Lock()
	cr := c.reservations[id]
	if cr == nil {
		c.mu.Unlock()
		return fmt.Errorf("end capacity reservation %s: no such reservation", id)
	}
	doomed := c.endReservation(cr, st)
	c.mu.Unlock()
	c.terminateAll(doomed)
	return nil
}

// endReservation moves an active reservation to st and takes its instances
// out of it; it returns the instances EC2 terminates with it (a capacity
// block's). Caller holds mu.
func (c *Cloud) endReservation(cr *types.CapacityReservation, st types.CapacityReservationState) []string {
	if cr.State != types.CapacityReservationStateActive {
		return nil
	}
	cr.State = st
	cr.AvailableInstanceCount = aws.Int32(0)
	var doomed []string
	for _, id := range c.order {
		inst := c.instances[id]
		if aws.ToString(inst.CapacityReservationId) != aws.ToString(cr.CapacityReservationId) {
			continue
		}
		inst.CapacityReservationId = nil
		if cr.ReservationType == types.CapacityReservationTypeCapacityBlock {
			doomed = append(doomed, id)
		}
	}
	return doomed
}

// terminateAll terminates the instances of an ended capacity block, as
// EC2's scheduled stop does.
func (c *Cloud) terminateAll(ids []string) {
	for _, id := range ids {
		_ = c.Terminate(id, "Server.ScheduledStop") // the instance exists: it was just listed
	}
}

// expireReservations ends the active reservations whose end date has
// passed. Caller holds mu; the returned instances are terminated by the
// caller once it has released mu.
func (c *Cloud) expireReservations() []string {
	now := c.cfg.Now()
	var doomed []string
	for _, id := range c.resOrder {
		cr := c.reservations[id]
		if cr.EndDate != nil && !now.Before(*cr.EndDate) {
			doomed = append(doomed, c.endReservation(cr, types.CapacityReservationStateExpired)...)
		}
	}
	return doomed
}

// DescribeCapacityReservations lists reservations by id and filters
// (owner-id, state, instance-type, availability-zone,
// instance-match-criteria, reservation-type, tag:<key>, tag-key).
func (c *Cloud) DescribeCapacityReservations(_ context.Context, in *ec2.DescribeCapacityReservationsInput) (*ec2.DescribeCapacityReservationsOutput, error) {
	c.mu.Lock()
	doomed := c.expireReservations()
	out, err := c.describeReservations(in)
	c.mu.Unlock()
	c.terminateAll(doomed)
	return out, err
}

// describeReservations answers DescribeCapacityReservations. Caller holds mu.
func (c *Cloud) describeReservations(in *ec2.DescribeCapacityReservationsInput) (*ec2.DescribeCapacityReservationsOutput, error) {
	if id, ok := missing(in.CapacityReservationIds, func(id string) bool { return c.reservations[id] != nil }); ok {
		return nil, protocol.Errorf("InvalidCapacityReservationId.NotFound", "The capacity reservation ID '%s' does not exist", id)
	}
	asked := func(yield func(types.CapacityReservation, attrs) bool) {
		for _, id := range c.resOrder {
			if listed(in.CapacityReservationIds, id) && !yield(reservationItem(c.reservations[id])) {
				return
			}
		}
	}
	answer := func(items []types.CapacityReservation, next *string) *ec2.DescribeCapacityReservationsOutput {
		return &ec2.DescribeCapacityReservationsOutput{CapacityReservations: items, NextToken: next}
	}
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 1, 1000}, asked, answer)
}

// reservationItem is the copy of a reservation a caller gets, with the
// values of the filters it answers.
func reservationItem(cr *types.CapacityReservation) (types.CapacityReservation, attrs) {
	values := map[string][]string{
		"capacity-reservation-id": one(cr.CapacityReservationId), "owner-id": one(cr.OwnerId), "state": {string(cr.State)},
		"instance-type": one(cr.InstanceType), "availability-zone": one(cr.AvailabilityZone),
		"instance-match-criteria": {string(cr.InstanceMatchCriteria)}, "reservation-type": {string(cr.ReservationType)},
		"instance-platform": {string(cr.InstancePlatform)}, "tenancy": {string(cr.Tenancy)},
	}
	item := *cr
	item.Tags = cloneTags(cr.Tags)
	return item, taggedValuesOf(cr.Tags, values)
}

// reservationOf is the reservation a candidate's launch template targets
// ("" for none). Caller holds mu.
func reservationOf(cd *candidate) string {
	spec := cd.lt.data.CapacityReservationSpecification
	if spec == nil || spec.CapacityReservationTarget == nil {
		return ""
	}
	return aws.ToString(spec.CapacityReservationTarget.CapacityReservationId)
}

// reservationSpecOf is the targeting DescribeInstances reports for an
// instance launched from cd's template: the template's preference (open when
// it sets none: EC2 User Guide "Capacity Reservation instance eligibility",
// an instance without a specification runs in matching open reservations)
// and its target. Karpenter's provider reads the preference back to tell a
// reserved launch (capacity-reservations-only) from an on-demand instance
// that EC2 put into an open reservation (instance.capacityTypeFromInstance).
func reservationSpecOf(cd *candidate) *types.CapacityReservationSpecificationResponse {
	out := &types.CapacityReservationSpecificationResponse{CapacityReservationPreference: types.CapacityReservationPreferenceOpen}
	spec := cd.lt.data.CapacityReservationSpecification
	if spec == nil {
		return out
	}
	if spec.CapacityReservationPreference != "" {
		out.CapacityReservationPreference = spec.CapacityReservationPreference
	}
	if t := spec.CapacityReservationTarget; t != nil && t.CapacityReservationId != nil {
		out.CapacityReservationTarget = &types.CapacityReservationTargetResponse{CapacityReservationId: t.CapacityReservationId}
	}
	return out
}

// reservationUnavailable explains why a targeted reservation cannot take
// one more instance of the candidate. Caller holds mu.
func (c *Cloud) reservationUnavailable(cd *candidate, id string) (string, string) {
	cr := c.reservations[id]
	switch {
	case cr == nil:
		return "InvalidCapacityReservationId.NotFound", fmt.Sprintf("The capacity reservation ID '%s' does not exist", id)
	case aws.ToString(cr.InstanceType) != cd.itype || aws.ToString(cr.AvailabilityZone) != cd.zone:
		return "InvalidParameterCombination", fmt.Sprintf("The instance type %s in %s does not match capacity reservation %s (%s in %s)",
			cd.itype, cd.zone, id, aws.ToString(cr.InstanceType), aws.ToString(cr.AvailabilityZone))
	case cr.State != types.CapacityReservationStateActive || aws.ToInt32(cr.AvailableInstanceCount) <= 0:
		return "ReservationCapacityExceeded", fmt.Sprintf("Insufficient capacity in the Capacity Reservation %s.", id)
	}
	return "", ""
}

// joinReservation puts a launched instance into the reservation it targets,
// or into a matching open one when its template allows that. Caller holds mu.
func (c *Cloud) joinReservation(inst *instance, cd *candidate, life types.InstanceLifecycle) {
	inst.CapacityReservationSpecification = reservationSpecOf(cd)
	id := reservationOf(cd)
	if id == "" && life == types.InstanceLifecycleOnDemand {
		spec := cd.lt.data.CapacityReservationSpecification
		if spec != nil && spec.CapacityReservationPreference == types.CapacityReservationPreferenceNone {
			return
		}
		for _, rid := range c.resOrder {
			cr := c.reservations[rid]
			if cr.InstanceMatchCriteria == types.InstanceMatchCriteriaOpen && cr.State == types.CapacityReservationStateActive &&
				aws.ToString(cr.InstanceType) == cd.itype && aws.ToString(cr.AvailabilityZone) == cd.zone && aws.ToInt32(cr.AvailableInstanceCount) > 0 {
				id = rid
				break
			}
		}
	}
	if cr := c.reservations[id]; cr != nil {
		cr.AvailableInstanceCount = aws.Int32(aws.ToInt32(cr.AvailableInstanceCount) - 1)
		inst.CapacityReservationId = aws.String(id)
	}
}

// leaveReservation gives a terminated instance's slot back. Caller holds mu.
func (c *Cloud) leaveReservation(inst *instance) {
	cr := c.reservations[aws.ToString(inst.CapacityReservationId)]
	if cr == nil {
		return
	}
	if cr.State == types.CapacityReservationStateActive {
		cr.AvailableInstanceCount = aws.Int32(min(aws.ToInt32(cr.AvailableInstanceCount)+1, aws.ToInt32(cr.TotalInstanceCount)))
	}
}
