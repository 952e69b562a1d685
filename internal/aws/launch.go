package aws

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Well-known label keys the launch path reads from NodeClaim requirements.
const (
	labelZone         = "topology.kubernetes.io/zone"
	labelInstanceType = "node.kubernetes.io/instance-type"
	labelCapacityType = "karpenter.sh/capacity-type"
)

// maxLaunchAttempts bounds CreateFleet calls per Launch; each failed attempt
// removes at least one offering, so this only stops pathological loops.
const maxLaunchAttempts = 8

// iceSyncAge is how stale the local copy of the shared ICE set may be when a launch starts.
const iceSyncAge = 5 * time.Second

// LaunchRequest asks for one instance for a NodeClaim.
type LaunchRequest struct {
	NodeClaim *apis.NodeClaim
	NodeClass *apis.EC2NodeClass
	// InstanceTypes are the options the solver left for the claim, in any
	// order; Launch keeps the offerings the claim's requirements, the
	// EC2NodeClass's subnets and the ICE set allow, cheapest first.
	InstanceTypes []*catalog.InstanceType
	// New says the caller wrote the claim's record moments ago, under a
	// name never used before, and this is its first launch: no instance
	// can carry the claim's tag yet (instances are launched only for
	// records that exist), so Launch does not look for one. A resumed
	// claim, a claim whose create found it already written, and any retry
	// leave it false.
	New bool
	// FirstAttempt is the claim's first CreateFleet attempt not known to
	// be settled: the attempts before it were answered and launched
	// nothing (an earlier Launch's error said so: NextAttempt). Launch
	// starts there, so a claim retried after its parameters changed (the
	// ICE set moved on) sends a token never used with other parameters.
	// 0 for a claim never launched; a stale lower value is safe (see
	// doc.go).
	FirstAttempt int
	// Allocatable are the options the planner computed the claim's types
	// with (catalog.Catalog.OptionsFor): the launch template's max pods
	// must be what it assumed. Nil: the node class's own
	// (catalog.OptionsForNodeClass), for callers that plan nothing.
	Allocatable *catalog.AllocatableOptions
}

// option is one instance type with the offerings a launch may use.
type option struct {
	it        *catalog.InstanceType
	offerings []catalog.Offering // of the chosen capacity type, cheapest first
	ami       AMI
}

// Launch creates the NodeClaim's instance with CreateFleet and returns it.
// Re-launching a claim whose instance already exists (a crash after
// CreateFleet) returns that instance; req.New says there can be none.
// Capacity errors mark the offering unavailable in the ICE set and the
// launch goes on with what remains; when nothing remains the error wraps
// ErrInsufficientCapacity. A call still throttled after the SDK's retries
// (CreateFleet, or a DescribeInstances or discovery read on the way) ends
// the launch with an error wrapping ErrThrottled and no attempt settled.
func (p *Provider) Launch(ctx context.Context, req LaunchRequest) (Instance, error) {
	inst, err := p.launchClaim(ctx, req)
	return inst, markThrottled(err)
}

// AttemptError is a failed Launch's error with the claim's first attempt
// not known to be settled (Next).
type AttemptError struct {
	Next int
	Err  error
}

func (e *AttemptError) Error() string { return e.Err.Error() }
func (e *AttemptError) Unwrap() error { return e.Err }

// NextAttempt is the LaunchRequest.FirstAttempt for the next Launch of a
// claim whose Launch returned err; ok is false when err says nothing about
// attempts (the caller keeps what it had).
func NextAttempt(err error) (next int, ok bool) {
	var ae *AttemptError
	if errors.As(err, &ae) {
		return ae.Next, true
	}
	return 0, false
}

func (p *Provider) launchClaim(ctx context.Context, req LaunchRequest) (Instance, error) {
	claim, nc := req.NodeClaim, req.NodeClass
	if claim == nil || claim.Name == "" || nc == nil {
		return Instance{}, fmt.Errorf("launch: NodeClaim with a name and its EC2NodeClass are required")
	}
	name := claim.Name
	if err := p.ice.Sync(ctx, iceSyncAge); err != nil {
		p.log.WarnContext(ctx, "using local ICE set", "nodeclaim", name, "error", err)
	}
	if !req.New {
		if existing, err := p.findClaimInstance(ctx, name); err != nil {
			return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
		} else if existing != nil {
			p.log.InfoContext(ctx, "nodeclaim already has an instance; adopting it", "nodeclaim", name, "instance", existing.ID)
			p.completeReservation(ctx, nc, existing)
			return *existing, nil
		}
	}
	l, err := p.prepareLaunch(ctx, req)
	if err != nil {
		return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	}
	first := max(req.FirstAttempt, 0)
	for attempt := first; attempt < first+maxLaunchAttempts; attempt++ {
		inst, done, err := p.launchAttempt(ctx, l, attempt)
		if !done {
			continue // answered, nothing launched: attempt is settled
		}
		if err != nil {
			// This attempt's fate may be unknown (a throttled or lost
			// call): the next Launch starts with its token again.
			return Instance{}, &AttemptError{Next: attempt, Err: err}
		}
		p.learnPartition(ctx, l.pl, &inst)
		return inst, nil
	}
	err = &LaunchError{NodeClaim: name, Errors: l.lastErrs, Err: fmt.Errorf("%w: gave up after %d CreateFleet attempts", ErrInsufficientCapacity, maxLaunchAttempts)}
	return Instance{}, &AttemptError{Next: first + maxLaunchAttempts, Err: err}
}

// launch is what every CreateFleet attempt of one Launch shares.
type launch struct {
	claim   *apis.NodeClaim
	nc      *apis.EC2NodeClass
	types   []*catalog.InstanceType
	cluster ClusterInfo
	groups  []SecurityGroup
	amis    []AMI
	profile string
	// pl is the claim's placement group and partition (none when the class
	// selects no group).
	pl placement
	// lastErrs are the latest attempt's fleet errors, reported when the
	// launch gives up.
	lastErrs []string
	// noSpot leaves spot out of the next attempts (spotfallback.go).
	noSpot bool
	// planned are LaunchRequest.Allocatable.
	planned *catalog.AllocatableOptions
}

// allocatable are the options the launch's max pods come from.
func (l *launch) allocatable() catalog.AllocatableOptions {
	if l.planned != nil {
		return *l.planned
	}
	return catalog.OptionsForNodeClass(l.nc)
}

// prepareLaunch discovers what does not change between attempts: the
// cluster, the security groups, the AMIs and the instance profile.
func (p *Provider) prepareLaunch(ctx context.Context, req LaunchRequest) (*launch, error) {
	// Types the class cannot run on never reach CreateFleet, whatever the
	// caller passed (the solver already leaves them out).
	types := slices.DeleteFunc(slices.Clone(req.InstanceTypes), func(it *catalog.InstanceType) bool {
		return it != nil && !it.SupportsNodeClass(req.NodeClass)
	})
	l := &launch{claim: req.NodeClaim, nc: req.NodeClass, types: types, planned: req.Allocatable}
	var err error
	if l.cluster, err = p.Cluster(ctx); err != nil {
		return nil, err
	}
	if l.groups, err = p.SecurityGroups(ctx, l.nc); err != nil {
		return nil, err
	}
	if l.amis, err = p.AMIs(ctx, l.nc); err != nil {
		return nil, err
	}
	if l.profile, err = p.instanceProfile(l.nc); err != nil {
		return nil, err
	}
	pg, err := p.PlacementGroup(ctx, l.nc)
	if err != nil {
		return nil, err
	}
	if l.pl, err = choosePlacement(pg, l.claim); err != nil {
		return nil, err
	}
	return l, nil
}

// launchAttempt plans the options left and makes one CreateFleet call. done
// is false when the launch should try again (the call changed what the next
// plan sees: a stale template, an exhausted subnet, capacity errors).
func (p *Provider) launchAttempt(ctx context.Context, l *launch, attempt int) (inst Instance, done bool, err error) {
	name := l.claim.Name
	// Re-read per attempt (cached): an exhausted subnet invalidates the cache.
	subnets, err := p.Subnets(ctx, l.nc)
	if err != nil {
		return Instance{}, true, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	}
	zonal := ZonalSubnets(subnets)
	if zonal, err = p.placementZones(ctx, l.pl, zonal); err != nil {
		return Instance{}, true, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	}
	capacityType, opts := p.plan(l.claim, l.types, zonal, l.amis, p.spotAllowed(l))
	if len(opts) == 0 {
		err := fmt.Errorf("%w: no available offering of %d instance types in zones %v", ErrInsufficientCapacity, len(l.types), zoneNames(zonal))
		return Instance{}, true, &LaunchError{NodeClaim: name, Errors: l.lastErrs, Err: err}
	}
	if err := checkMinValues(l.claim.Spec.Requirements, opts); err != nil && !p.opts.MinValuesBestEffort {
		return Instance{}, true, &LaunchError{NodeClaim: name, Errors: l.lastErrs, Err: err}
	}
	in, fts, err := p.fleetInput(ctx, l, zonal, capacityType, opts, attempt)
	if err != nil {
		return Instance{}, true, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	}
	out, err := p.clients.EC2.CreateFleet(ctx, in)
	if err != nil {
		return p.fleetCallFailed(ctx, l.nc, name, err)
	}
	return p.fleetAnswered(ctx, l, out, zonal, capacityType, fts)
}

// fleetCallFailed handles a CreateFleet call the API refused as a whole.
func (p *Provider) fleetCallFailed(ctx context.Context, nc *apis.EC2NodeClass, name string, err error) (inst Instance, done bool, _ error) {
	switch code := apiErrorCode(err); {
	case isThrottleCode(code):
		// No answer about capacity and nothing launched: the attempt is
		// not settled, so the launch ends here and the next Launch of the
		// claim sends this same token (doc.go, one instance per claim).
		return Instance{}, true, fmt.Errorf("launch nodeclaim %s: create fleet: %w: %w", name, ErrThrottled, err)
	case code == "IdempotentParameterMismatch":
		// An earlier run sent this token with other parameters (its
		// response was lost, then the ICE set or the options moved on):
		// a launch with this token happened. Taking the next token could
		// launch a second instance, so find the first one or give up.
		inst, err := p.awaitClaimInstance(ctx, name)
		if err != nil {
			return Instance{}, true, fmt.Errorf("launch nodeclaim %s: %w", name, err)
		}
		p.log.InfoContext(ctx, "earlier launch with the same client token found; adopting it", "nodeclaim", name, "instance", inst.ID)
		p.completeReservation(ctx, nc, &inst)
		return inst, true, nil
	case strings.HasPrefix(code, "InvalidLaunchTemplate"):
		// A template was garbage-collected under us; forget cached names and retry.
		p.templates.invalidateAll()
		return Instance{}, false, nil
	case code == "InvalidSubnetID.NotFound" || strings.HasPrefix(code, "InvalidGroup") || code == "InvalidAMIID.NotFound":
		p.InvalidateDiscovery()
	}
	return Instance{}, true, fmt.Errorf("launch nodeclaim %s: create fleet: %w", name, err)
}

// fleetAnswered takes a CreateFleet answer: its instance, or its errors
// recorded so the next attempt avoids what failed.
func (p *Provider) fleetAnswered(ctx context.Context, l *launch, out *ec2.CreateFleetOutput, zonal map[string]Subnet,
	capacityType string, fts *fleetTemplates) (inst Instance, done bool, err error) {
	name := l.claim.Name
	if inst, ok := p.launched(out, zonal, capacityType, fts); ok {
		// Pools the fleet tried before succeeding are short of capacity too;
		// record them so the next claim does not start there.
		_, _ = p.recordFleetErrors(ctx, name, out.Errors, zonal, capacityType, fts)
		p.log.InfoContext(ctx, "launched instance", "nodeclaim", name, "instance", inst.ID, "instance-type", inst.Type,
			"zone", inst.Zone, "capacity-type", inst.CapacityType, "image", inst.ImageID, "launch-template", inst.LaunchTemplate)
		return inst, true, nil
	}
	if staleTemplate(out.Errors) {
		p.templates.invalidateAll()
		return Instance{}, false, nil
	}
	if p.spotDead(ctx, l, out.Errors, capacityType) {
		// Spot cannot succeed for this claim: the next attempt plans without it.
		_, _ = p.recordFleetErrors(ctx, name, capacityOnly(out.Errors), zonal, capacityType, fts)
		l.lastErrs = fleetErrorStrings(out.Errors)
		return Instance{}, false, nil
	}
	if exhaustedSubnet(out.Errors) {
		// Free-address counts were stale; re-discover and let the zone's
		// next-best subnet (or another zone) take the launch.
		p.subnets.invalidateAll()
		if _, err := p.recordFleetErrors(ctx, name, capacityOnly(out.Errors), zonal, capacityType, fts); err != nil {
			p.log.DebugContext(ctx, "no capacity errors beside the exhausted subnet", "nodeclaim", name)
		}
		l.lastErrs = fleetErrorStrings(out.Errors)
		return Instance{}, false, nil
	}
	l.lastErrs, err = p.recordFleetErrors(ctx, name, out.Errors, zonal, capacityType, fts)
	if err != nil {
		return Instance{}, true, &LaunchError{NodeClaim: name, Errors: l.lastErrs, Err: err}
	}
	return Instance{}, false, nil
}

// awaitClaimInstance looks for the claim's instance with backoff for up to
// LaunchConfirmWait: EC2's reads are eventually consistent, so an instance
// launched moments ago may not be listed yet. It returns an error wrapping
// ErrLaunchInDoubt when none shows up.
func (p *Provider) awaitClaimInstance(ctx context.Context, name string) (Instance, error) {
	deadline := time.Now().Add(p.opts.LaunchConfirmWait)
	delay := 200 * time.Millisecond
	for {
		inst, err := p.findClaimInstance(ctx, name)
		if err != nil {
			return Instance{}, err
		}
		if inst != nil {
			return *inst, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return Instance{}, fmt.Errorf("%w: no instance tagged for it after %s", ErrLaunchInDoubt, p.opts.LaunchConfirmWait)
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return Instance{}, fmt.Errorf("%w: %w", ErrLaunchInDoubt, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 5*time.Second)
	}
}
