package aws_test

import (
	"errors"
	"testing"
	"time"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// TestSpotServiceLinkedRoleFallsBackToOnDemand: without the EC2 Spot
// service-linked role (simulator rule spot-service-linked-role), a claim
// that allows on-demand gets it in the same Launch, the next claim does
// not try spot at all until the ICE TTL passes, and a spot-only claim
// fails as a capacity error (its pods are re-planned, nothing launched).
// Karpenter does the same: PR #7998, MarkCapacityTypeUnavailable.
func TestSpotServiceLinkedRoleFallsBackToOnDemand(t *testing.T) {
	e := newEnv(t, false)
	e.sim.SetServiceLinkedRole("AWSServiceRoleForEC2Spot", false)
	nc := nodeClass("al2023@latest")
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("slr-1"), NodeClass: nc, InstanceTypes: e.types("m5.large", "m5.xlarge")})
	if err != nil || inst.CapacityType != "on-demand" {
		t.Fatalf("claim allowing on-demand without the spot role: %v %+v", err, inst)
	}
	before := len(e.sim.Calls("ec2", "CreateFleet"))
	inst, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("slr-2"), NodeClass: nc, InstanceTypes: e.types("m5.large")})
	calls := e.sim.Calls("ec2", "CreateFleet")
	if err != nil || inst.CapacityType != "on-demand" || len(calls) != before+1 ||
		calls[len(calls)-1].Params["TargetCapacitySpecification.DefaultTargetCapacityType"] != "on-demand" {
		t.Fatalf("second claim: %v %+v after %d fleet calls, want one on-demand call", err, inst, len(calls)-before)
	}
	_, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("slr-3", in("karpenter.sh/capacity-type", "spot")), NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if !errors.Is(err, nwaws.ErrInsufficientCapacity) {
		t.Fatalf("spot-only claim without the spot role: %v, want ErrInsufficientCapacity", err)
	}
	// Once the role exists and the block has expired, spot is used again.
	e.sim.SetServiceLinkedRole("AWSServiceRoleForEC2Spot", true)
	e.clock.Advance(3*time.Minute + time.Second)
	inst, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("slr-4"), NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if err != nil || inst.CapacityType != "spot" {
		t.Fatalf("with the role back: %v %+v, want spot", err, inst)
	}
}
