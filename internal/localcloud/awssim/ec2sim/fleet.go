package ec2sim

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

type fleetResult struct {
	out         *ec2.CreateFleetOutput
	fingerprint string // the request without its token, for IdempotentParameterMismatch
}

// fingerprint is a canonical form of a fleet request (json.Marshal follows
// pointers and sorts nothing it does not need to: field order is fixed).
func fingerprint(in *ec2.CreateFleetInput) string {
	cp := *in
	cp.ClientToken = nil
	b, _ := json.Marshal(cp)
	return string(b)
}

// candidate is one (launch template, override) pool a fleet may launch into.
type candidate struct {
	lt       *launchTemplate
	spec     *types.FleetLaunchTemplateSpecification
	ov       types.FleetLaunchTemplateOverridesRequest
	itype    string
	zone     string
	subnet   *subnet
	image    *types.Image
	priority float64
	index    int
}

func (cd *candidate) response() *types.LaunchTemplateAndOverridesResponse {
	return &types.LaunchTemplateAndOverridesResponse{
		LaunchTemplateSpecification: cd.spec,
		Overrides: &types.FleetLaunchTemplateOverrides{
			InstanceType: types.InstanceType(cd.itype), SubnetId: cd.ov.SubnetId, AvailabilityZone: cd.ov.AvailabilityZone,
			Priority: cd.ov.Priority, MaxPrice: cd.ov.MaxPrice, ImageId: cd.ov.ImageId, WeightedCapacity: cd.ov.WeightedCapacity,
		},
	}
}

// CreateFleet launches an instant fleet: it orders the override pools by the
// allocation strategy, launches into the best pool with capacity and reports
// a per-pool error for every pool it tried and could not use, as EC2 does.
func (c *Cloud) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput) (*ec2.CreateFleetOutput, error) {
	if in.Type != types.FleetTypeInstant {
		return nil, protocol.Errorf("InvalidParameterValue", "The simulator supports only fleets of type 'instant', got '%s'", in.Type)
	}
	if err := c.checkFleetTagTypes(in); err != nil {
		return nil, err
	}
	if err := c.checkFleetLimits(in); err != nil {
		return nil, err
	}
	tcs := in.TargetCapacitySpecification
	if tcs == nil || aws.ToInt32(tcs.TotalTargetCapacity) < 1 {
		return nil, protocol.Errorf("InvalidTargetCapacitySpecification", "TotalTargetCapacity must be at least 1")
	}
	if len(in.LaunchTemplateConfigs) == 0 {
		return nil, protocol.Errorf("MissingParameter", "The request must contain the parameter LaunchTemplateConfigs")
	}
	total := aws.ToInt32(tcs.TotalTargetCapacity)
	od, spot := aws.ToInt32(tcs.OnDemandTargetCapacity), aws.ToInt32(tcs.SpotTargetCapacity)
	if rest := total - od - spot; rest > 0 {
		switch tcs.DefaultTargetCapacityType {
		case types.DefaultTargetCapacityTypeSpot:
			spot += rest
		case types.DefaultTargetCapacityTypeOnDemand, types.DefaultTargetCapacityTypeCapacityBlock, types.DefaultTargetCapacityTypeReservedCapacity:
			// Capacity blocks and interruptible reservations (reserved-capacity)
			// launch as on-demand instances into their reservation.
			od += rest
		default:
			return nil, protocol.Errorf("InvalidTargetCapacitySpecification", "DefaultTargetCapacityType (spot or on-demand) is required when TotalTargetCapacity exceeds OnDemandTargetCapacity + SpotTargetCapacity")
		}
	}

	c.mu.Lock()
	doomed := c.expireReservations()
	defer c.terminateAll(doomed)
	token := aws.ToString(in.ClientToken)
	fp := fingerprint(in)
	if r, ok := c.fleets[token]; ok && token != "" {
		c.mu.Unlock()
		if r.fingerprint != fp && c.cfg.Rules.On(fidelity.IdempotentMismatch) {
			return nil, protocol.Errorf("IdempotentParameterMismatch", "The client token %s was used with different request parameters.", token)
		}
		return r.out, nil
	}
	// A new instant fleet launches through RunInstances, so its instances
	// draw RunInstances' resource tokens (throttle.go); a replay launches
	// nothing and draws none. Refused whole, before anything launches.
	if err := c.throttleResources(launchResource, int(total)); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	out := &ec2.CreateFleetOutput{FleetId: aws.String(c.newID("fleet")), Errors: []types.CreateFleetError{}, Instances: []types.CreateFleetInstance{}}
	cands := c.candidates(in, out)
	var launched []*instance
	for _, lc := range []struct {
		life types.InstanceLifecycle
		n    int32
	}{{types.InstanceLifecycleOnDemand, od}, {types.InstanceLifecycleSpot, spot}} {
		if lc.n > 0 {
			launched = append(launched, c.fill(in, out, cands, lc.life, lc.n)...)
		}
	}
	if token != "" {
		c.fleets[token] = &fleetResult{out: out, fingerprint: fp}
	}
	var ts []Transition
	for _, inst := range launched {
		ts = append(ts, Transition{Instance: inst.snapshot(), From: "", To: types.InstanceStateNamePending, CapacityType: inst.capacityType, UserData: inst.userData})
	}
	c.mu.Unlock()
	c.notify(ts...)
	for _, inst := range launched {
		c.revealLater(inst)
		to, reason := types.InstanceStateNameRunning, ""
		if err := c.volumeKeysUsable(ctx, inst.volumeKeys); err != nil {
			to, reason = types.InstanceStateNameTerminated, invalidKMSKeyReason
		}
		c.schedule(*inst.InstanceId, c.cfg.PendingDelay, types.InstanceStateNamePending, to, reason)
	}
	return out, nil
}

// candidates validates every override; invalid ones become fleet errors. Caller holds mu.
func (c *Cloud) candidates(in *ec2.CreateFleetInput, out *ec2.CreateFleetOutput) []*candidate {
	var cands []*candidate
	fail := func(spec *types.FleetLaunchTemplateSpecification, ov *types.FleetLaunchTemplateOverridesRequest, code, msg string) {
		e := types.CreateFleetError{ErrorCode: aws.String(code), ErrorMessage: aws.String(msg),
			LaunchTemplateAndOverrides: &types.LaunchTemplateAndOverridesResponse{LaunchTemplateSpecification: spec}}
		if ov != nil {
			e.LaunchTemplateAndOverrides = (&candidate{spec: spec, ov: *ov, itype: string(ov.InstanceType)}).response()
		}
		out.Errors = append(out.Errors, e)
	}
	for _, cfg := range in.LaunchTemplateConfigs {
		req := cfg.LaunchTemplateSpecification
		if req == nil {
			req = &types.FleetLaunchTemplateSpecificationRequest{}
		}
		spec := &types.FleetLaunchTemplateSpecification{LaunchTemplateId: req.LaunchTemplateId, LaunchTemplateName: req.LaunchTemplateName, Version: req.Version}
		lt, err := c.resolveTemplate(req.LaunchTemplateId, req.LaunchTemplateName)
		if err != nil {
			ae := protocol.AsAPIError(err)
			fail(spec, nil, ae.Code, ae.Message)
			continue
		}
		spec.LaunchTemplateId, spec.LaunchTemplateName = lt.meta.LaunchTemplateId, lt.meta.LaunchTemplateName
		if spec.Version == nil {
			spec.Version = aws.String("1")
		}
		ovs := cfg.Overrides
		if len(ovs) == 0 {
			ovs = []types.FleetLaunchTemplateOverridesRequest{{}}
		}
		for _, ov := range ovs {
			cd, code, msg := c.candidate(lt, spec, ov)
			if code != "" {
				fail(spec, &ov, code, msg)
				continue
			}
			cd.index = len(cands)
			cands = append(cands, cd)
		}
	}
	return cands
}

func (c *Cloud) candidate(lt *launchTemplate, spec *types.FleetLaunchTemplateSpecification, ov types.FleetLaunchTemplateOverridesRequest) (*candidate, string, string) {
	cd := &candidate{lt: lt, spec: spec, ov: ov, itype: string(ov.InstanceType), priority: 1e18}
	if cd.itype == "" {
		cd.itype = string(lt.data.InstanceType)
	}
	info, ok := c.cfg.Catalog.Types[cd.itype]
	if !ok {
		return nil, "InvalidParameterValue", fmt.Sprintf("The instance type '%s' does not exist", cd.itype)
	}
	if ov.Priority != nil {
		cd.priority = *ov.Priority
	}
	switch {
	case aws.ToString(ov.SubnetId) != "":
		cd.subnet = c.subnetByID(*ov.SubnetId)
		if cd.subnet == nil {
			return nil, "InvalidSubnetID.NotFound", fmt.Sprintf("The subnet ID '%s' does not exist", *ov.SubnetId)
		}
		cd.zone = *cd.subnet.AvailabilityZone
		if z := aws.ToString(ov.AvailabilityZone); z != "" && z != cd.zone {
			return nil, "InvalidParameterValue", fmt.Sprintf("Subnet %s is in %s, not %s", *ov.SubnetId, cd.zone, z)
		}
	default:
		cd.zone = aws.ToString(ov.AvailabilityZone)
		for _, s := range c.subnets {
			if (cd.zone == "" || *s.AvailabilityZone == cd.zone) && !aws.ToBool(s.MapPublicIpOnLaunch) {
				cd.subnet, cd.zone = s, *s.AvailabilityZone
				break
			}
		}
		if cd.subnet == nil {
			return nil, "InvalidParameterValue", fmt.Sprintf("Invalid availability zone: [%s]", cd.zone)
		}
	}
	imageID := aws.ToString(ov.ImageId)
	if imageID == "" {
		imageID = aws.ToString(lt.data.ImageId)
	}
	if imageID == "" {
		return nil, "MissingParameter", "The request must contain the parameter ImageId"
	}
	if cd.image = c.imageByID(imageID); cd.image == nil {
		return nil, "InvalidAMIID.NotFound", fmt.Sprintf("The image id '[%s]' does not exist", imageID)
	}
	archOK := false
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		archOK = archOK || string(a) == string(cd.image.Architecture)
	}
	if !archOK {
		return nil, "InvalidParameterValue", fmt.Sprintf("The architecture '%s' of the specified instance type does not match the architecture '%s' of the specified AMI.", info.ProcessorInfo.SupportedArchitectures[0], cd.image.Architecture)
	}
	if _, code, msg := c.templatePlacementGroup(&lt.data); code != "" {
		return nil, code, msg
	}
	if wantsNestedVirtualization(&lt.data) && !slices.Contains(info.ProcessorInfo.SupportedFeatures, types.SupportedAdditionalProcessorFeatureNestedVirtualization) {
		return nil, "Unsupported", fmt.Sprintf("Nested virtualization is not supported for instance type '%s'.", cd.itype)
	}
	return cd, "", ""
}

// rank sorts the pools by the fleet's allocation strategy for one lifecycle.
func (c *Cloud) rank(in *ec2.CreateFleetInput, cands []*candidate, life types.InstanceLifecycle) []*candidate {
	price := func(cd *candidate) float64 {
		if life == types.InstanceLifecycleSpot {
			p, _ := c.spotPrice(cd.itype, cd.zone)
			return p
		}
		return c.cfg.Catalog.OnDemand[cd.itype]
	}
	// depth ranks pools: unlimited capacity is deepest, then by remaining count.
	depth := func(cd *candidate) int {
		n, limited := c.remaining(Pool{cd.itype, cd.zone, string(life)})
		if !limited {
			return 1 << 30
		}
		return n
	}
	strategy := "lowest-price"
	if life == types.InstanceLifecycleSpot && in.SpotOptions != nil && in.SpotOptions.AllocationStrategy != "" {
		strategy = string(in.SpotOptions.AllocationStrategy)
	}
	if life == types.InstanceLifecycleOnDemand && in.OnDemandOptions != nil && in.OnDemandOptions.AllocationStrategy != "" {
		strategy = string(in.OnDemandOptions.AllocationStrategy)
	}
	out := append([]*candidate(nil), cands...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		switch strategy {
		case "prioritized", "capacity-optimized-prioritized":
			if a.priority != b.priority {
				return a.priority < b.priority
			}
		case "capacity-optimized":
			if depth(a) != depth(b) {
				return depth(a) > depth(b)
			}
		case "price-capacity-optimized":
			// Pools that can take the whole request first, then the cheapest.
			da, db := depth(a) > 0, depth(b) > 0
			if da != db {
				return da
			}
		}
		if pa, pb := price(a), price(b); pa != pb {
			return pa < pb
		}
		return a.priority < b.priority
	})
	return out
}

// fill launches n instances of one lifecycle. Caller holds mu.
func (c *Cloud) fill(in *ec2.CreateFleetInput, out *ec2.CreateFleetOutput, cands []*candidate, life types.InstanceLifecycle, n int32) []*instance {
	ordered := c.rank(in, cands, life)
	if len(ordered) == 0 {
		c.unfulfillable(out, life)
		return nil
	}
	failed := map[int]bool{}
	groups := map[int]int{} // candidate index -> index in out.Instances
	var launched []*instance
	for _, cd := range ordered {
		for n > 0 && !failed[cd.index] {
			if code, msg := c.unavailable(cd, life); code != "" {
				failed[cd.index] = true
				out.Errors = append(out.Errors, types.CreateFleetError{Lifecycle: life, ErrorCode: aws.String(code), ErrorMessage: aws.String(msg), LaunchTemplateAndOverrides: cd.response()})
				break
			}
			inst := c.launch(in, cd, life, *out.FleetId)
			launched = append(launched, inst)
			n--
			gi, ok := groups[cd.index]
			if !ok {
				gi = len(out.Instances)
				groups[cd.index] = gi
				out.Instances = append(out.Instances, types.CreateFleetInstance{InstanceType: types.InstanceType(cd.itype), Lifecycle: life, LaunchTemplateAndOverrides: cd.response()})
			}
			out.Instances[gi].InstanceIds = append(out.Instances[gi].InstanceIds, *inst.InstanceId)
		}
		if n == 0 {
			break
		}
	}
	if n > 0 && len(launched) == 0 && life == types.InstanceLifecycleSpot {
		c.unfulfillable(out, life)
	}
	return launched
}

// unfulfillable adds the fleet-wide error of a lifecycle no pool could
// serve: UnfulfillableCapacity with no override, beside the pools' own
// errors when there are any (aws/karpenter-provider-aws #1233 has it alone
// with this message, #5789 beside InsufficientInstanceCapacity).
func (c *Cloud) unfulfillable(out *ec2.CreateFleetOutput, life types.InstanceLifecycle) {
	if !c.cfg.Rules.On(fidelity.UnfulfillableCapacity) {
		return
	}
	out.Errors = append(out.Errors, types.CreateFleetError{Lifecycle: life, ErrorCode: aws.String("UnfulfillableCapacity"),
		ErrorMessage: aws.String("Unable to fulfill capacity due to your request configuration. Please adjust your request and try again.")})
}

// unavailable explains why a pool cannot launch one more instance right now.
func (c *Cloud) unavailable(cd *candidate, life types.InstanceLifecycle) (string, string) {
	if code, msg := c.spotTagsOnOtherLaunch(cd, life); code != "" {
		return code, msg
	}
	if code, msg := c.spotRoleMissing(life); code != "" {
		return code, msg
	}
	info := c.cfg.Catalog.Types[cd.itype]
	if !c.cfg.Catalog.Offered(cd.itype, cd.zone) {
		return "Unsupported", fmt.Sprintf("Your requested instance type (%s) is not supported in your requested Availability Zone (%s). Please retry your request by not specifying an Availability Zone or choosing %s.",
			cd.itype, cd.zone, strings.Join(c.cfg.Catalog.Offerings[cd.itype], ", "))
	}
	if life == types.InstanceLifecycleSpot && len(info.SupportedUsageClasses) > 0 && !hasUsage(info.SupportedUsageClasses, types.UsageClassTypeSpot) {
		return "Unsupported", fmt.Sprintf("The instance type %s is not supported for Spot Instances.", cd.itype)
	}
	if id := reservationOf(cd); id != "" {
		// Reserved capacity is the reservation's, not the pool's.
		if code, msg := c.reservationUnavailable(cd, id); code != "" {
			return code, msg
		}
	} else if n, limited := c.remaining(Pool{cd.itype, cd.zone, string(life)}); limited && n <= 0 && c.cfg.Rules.On(fidelity.InsufficientCapacity) {
		return "InsufficientInstanceCapacity", fmt.Sprintf("We currently do not have sufficient %s capacity in the Availability Zone you requested (%s). Our system will be working on provisioning additional capacity. You can currently get %s capacity by not specifying an Availability Zone in your request or choosing another Availability Zone.", cd.itype, cd.zone, cd.itype)
	}
	if code, msg := c.placementUnavailable(cd); code != "" {
		return code, msg
	}
	if code, msg := c.quotaExceeded(cd, life); code != "" {
		return code, msg
	}
	if life == types.InstanceLifecycleSpot && cd.ov.MaxPrice != nil && c.cfg.Rules.On(fidelity.SpotMaxPrice) {
		maxP, err := strconv.ParseFloat(*cd.ov.MaxPrice, 64)
		if p, _ := c.spotPrice(cd.itype, cd.zone); err == nil && p > maxP {
			return "SpotMaxPriceTooLow", fmt.Sprintf("Your Spot request price of %s is lower than the minimum required Spot request fulfillment price of %.4f.", *cd.ov.MaxPrice, p)
		}
	}
	if aws.ToInt32(cd.subnet.AvailableIpAddressCount) <= 0 {
		return "InsufficientFreeAddressesInSubnet", fmt.Sprintf("There are not enough free addresses in subnet '%s' to satisfy the requested number of instances.", *cd.subnet.SubnetId)
	}
	return "", ""
}

func hasUsage(us []types.UsageClassType, u types.UsageClassType) bool {
	for _, x := range us {
		if x == u {
			return true
		}
	}
	return false
}
