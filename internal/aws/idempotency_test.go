package aws_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
)

// claimInstances counts the simulator's live instances tagged for a claim,
// straight from its state (not through DescribeInstances, which may hide them).
func (e *env) claimInstances(claim string) []string {
	var ids []string
	for _, i := range e.sim.EC2().Instances() {
		if i.State == nil || (i.State.Name != "pending" && i.State.Name != "running") {
			continue
		}
		for _, t := range i.Tags {
			if *t.Key == nwaws.TagNodeClaim && *t.Value == claim {
				ids = append(ids, *i.InstanceId)
			}
		}
	}
	return ids
}

// loseCreateFleet makes the first launch of a claim reach EC2 but never
// return: CreateFleet takes effect and every SDK retry (same token, same
// parameters, so EC2 replays the fleet) loses its response too.
func (e *env) loseCreateFleet() (remove func()) {
	return e.sim.InjectFault(awssim.Fault{Service: "ec2", Operation: "CreateFleet", Code: "InternalError",
		Message: "response lost", Status: http.StatusInternalServerError, LoseResponse: true})
}

func (e *env) provider(confirmWait time.Duration) *nwaws.Provider {
	e.t.Helper()
	p, err := nwaws.New(nwaws.Options{ClusterName: testCluster, Region: testRegion, Owner: testOwner, Now: e.clock.Now, Logger: quiet, LaunchConfirmWait: confirmWait}, e.clients, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// TestLostLaunchResponseNeverLaunchesTwice: a run's CreateFleet response is
// lost; the next run (a fresh provider, as a new function invocation) has
// other options for the claim, so its first token no longer matches its
// parameters, and DescribeInstances does not show the first instance for a
// few calls. The second run must adopt the first instance, not launch another.
func TestLostLaunchResponseNeverLaunchesTwice(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	claim := newClaim("lost-1", in("karpenter.sh/capacity-type", "on-demand"))
	e.sim.EC2().HideNewInstances(3)
	remove := e.loseCreateFleet()
	if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("c5.large", "m5.large")}); err == nil {
		t.Fatal("first run: want the lost response as an error")
	}
	remove()
	first := e.claimInstances(claim.Name)
	if len(first) != 1 {
		t.Fatalf("first run launched %v, want one instance", first)
	}
	fleets := len(e.sim.Calls("ec2", "CreateFleet"))

	inst, err := e.provider(10*time.Second).Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if got := e.claimInstances(claim.Name); len(got) != 1 || inst.ID != first[0] {
		t.Fatalf("second run returned %s; claim's instances %v, want only %s", inst.ID, got, first[0])
	}
	calls := e.sim.Calls("ec2", "CreateFleet")[fleets:]
	if len(calls) != 1 || calls[0].ErrorCode != "IdempotentParameterMismatch" {
		t.Errorf("second run's CreateFleet calls %+v, want one IdempotentParameterMismatch", calls)
	}
}

// TestLostLaunchStaysInDoubt: when the first instance stays invisible past
// LaunchConfirmWait, the run fails with ErrLaunchInDoubt (the caller
// requeues) and later runs keep failing rather than launching a second one;
// once EC2 lists the instance, the next run adopts it.
func TestLostLaunchStaysInDoubt(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	claim := newClaim("lost-2", in("karpenter.sh/capacity-type", "on-demand"))
	e.sim.EC2().HideNewInstances(1 << 30)
	remove := e.loseCreateFleet()
	if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("c5.large", "m5.large")}); err == nil {
		t.Fatal("first run: want the lost response as an error")
	}
	remove()
	e.sim.EC2().HideNewInstances(0)
	for run := 2; run <= 3; run++ {
		start := time.Now()
		_, err := e.provider(500*time.Millisecond).Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large")})
		if !errors.Is(err, nwaws.ErrLaunchInDoubt) {
			t.Fatalf("run %d: want ErrLaunchInDoubt, got %v", run, err)
		}
		if d := time.Since(start); d < 500*time.Millisecond {
			t.Errorf("run %d gave up after %s, before LaunchConfirmWait", run, d)
		}
		if got := e.claimInstances(claim.Name); len(got) != 1 {
			t.Fatalf("run %d: claim's instances %v, want exactly one", run, got)
		}
	}
	// Sent again with the first run's parameters, token 0 replays the first
	// fleet and so returns its instance, visible or not.
	inst, err := e.provider(time.Second).Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("c5.large", "m5.large")})
	if err != nil {
		t.Fatalf("replay with the first parameters: %v", err)
	}
	if got := e.claimInstances(claim.Name); len(got) != 1 || got[0] != inst.ID {
		t.Fatalf("replay returned %s; claim's instances %v", inst.ID, got)
	}
}

// TestNewClaimLaunchSkipsTheInstanceLookup: a claim its caller has just
// created launches without DescribeInstances (no instance can carry its tag
// yet); any other launch looks for the claim's instance first and adopts it.
func TestNewClaimLaunchSkipsTheInstanceLookup(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	claim := newClaim("new-1", in("karpenter.sh/capacity-type", "on-demand"))
	describes := func() int { return len(e.sim.Calls("ec2", "DescribeInstances")) }
	before := describes()
	first, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large"), New: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := describes() - before; n != 0 {
		t.Errorf("new claim's launch made %d DescribeInstances calls, want none", n)
	}
	before = describes()
	again, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if err != nil {
		t.Fatal(err)
	}
	if describes() == before || again.ID != first.ID || len(e.claimInstances(claim.Name)) != 1 {
		t.Errorf("resumed launch: instance %s (first %s), claim's instances %v; want the first adopted after a lookup",
			again.ID, first.ID, e.claimInstances(claim.Name))
	}
}

// TestRetriedLaunchSkipsItsSettledAttempts: a launch's first attempt is
// answered (spot cannot succeed: no service-linked role) and its second
// fails as a whole; the next Launch of the claim plans differently (spot
// is now left out from the start), so resending the first token would get
// IdempotentParameterMismatch and the claim would end in doubt. Starting
// at NextAttempt, it sends a token never used and launches once.
func TestRetriedLaunchSkipsItsSettledAttempts(t *testing.T) {
	e := newEnv(t, false)
	p := e.provider(500 * time.Millisecond)
	e.sim.SetServiceLinkedRole("AWSServiceRoleForEC2Spot", false)
	nc := nodeClass("al2023@latest")
	claim := newClaim("settled-1")
	remove := e.sim.InjectFault(awssim.Fault{Service: "ec2", Operation: "CreateFleet", Code: "InternalError",
		Message: "try again", Status: http.StatusInternalServerError, Skip: 1})
	_, err := p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large")})
	remove()
	next, ok := nwaws.NextAttempt(err)
	if err == nil || !ok || next != 1 {
		t.Fatalf("first launch: %v; next attempt %d (%v), want an error and attempt 1 next", err, next, ok)
	}
	fleets := len(e.sim.Calls("ec2", "CreateFleet"))
	inst, err := p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large"), FirstAttempt: next})
	if err != nil {
		t.Fatalf("retried launch: %v", err)
	}
	if got := e.claimInstances(claim.Name); len(got) != 1 || got[0] != inst.ID {
		t.Fatalf("claim's instances %v, want only %s", got, inst.ID)
	}
	for _, c := range e.sim.Calls("ec2", "CreateFleet")[fleets:] {
		if c.ErrorCode != "" || c.Params["ClientToken"] != nwaws.ClientToken(testCluster, claim.Name, 1) {
			t.Errorf("retried launch's call %s %s, want token 1 answered", c.Params["ClientToken"], c.ErrorCode)
		}
	}
}
