package aws_test

import (
	"errors"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// TestThrottledLaunchKeepsItsClientToken: a CreateFleet still throttled
// after the SDK's retries (simulator rule request-throttling, a one-token
// bucket that refills once an hour) fails the Launch with ErrThrottled and
// launches nothing; once the bucket refills, the next Launch of the claim
// sends the same ClientToken and launches exactly one instance.
func TestThrottledLaunchKeepsItsClientToken(t *testing.T) {
	simClock := &cloudtest.Clock{}
	e := newEnvWith(t, false, func(o *awssim.Options) {
		o.Now = simClock.Now
		o.Throttle = ec2sim.Throttle{Mutating: ec2sim.Bucket{Capacity: 1, Refill: 1.0 / 3600}}
	})
	nc := nodeClass("al2023@latest")
	e.launch(t, "throttle-first", nc, "m5.large") // takes the bucket's token
	claim := newClaim("throttle-1")
	_, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if !errors.Is(err, nwaws.ErrThrottled) {
		t.Fatalf("launch past the CreateFleet bucket: %v, want ErrThrottled", err)
	}
	throttled := e.sim.Calls("ec2", "CreateFleet")[1:]
	if len(throttled) < 2 {
		t.Fatalf("%d throttled CreateFleet calls: want the SDK's retries with backoff", len(throttled))
	}
	token := throttled[0].Params["ClientToken"]
	for _, c := range throttled {
		if c.ErrorCode != "RequestLimitExceeded" || c.Params["ClientToken"] != token {
			t.Fatalf("throttled call %+v: want RequestLimitExceeded with token %s", c, token)
		}
	}
	if n := claimInstances(e, claim.Name); n != 0 {
		t.Fatalf("throttled launch left %d instances, want 0", n)
	}

	simClock.Advance(time.Hour)
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if err != nil {
		t.Fatalf("launch once the bucket refilled: %v", err)
	}
	calls := e.sim.Calls("ec2", "CreateFleet")
	if last := calls[len(calls)-1]; last.ErrorCode != "" || last.Params["ClientToken"] != token {
		t.Errorf("relaunch sent token %s (error %q), want the throttled attempt's %s", last.Params["ClientToken"], last.ErrorCode, token)
	}
	if n := claimInstances(e, claim.Name); n != 1 || inst.ID == "" {
		t.Errorf("claim has %d instances (launched %q), want exactly 1", n, inst.ID)
	}
}

// claimInstances counts the simulator's live instances tagged for claim.
func claimInstances(e *env, claim string) int {
	n := 0
	for _, in := range e.sim.EC2().Instances() {
		if st := in.State.Name; st != ec2types.InstanceStateNamePending && st != ec2types.InstanceStateNameRunning {
			continue
		}
		for _, tag := range in.Tags {
			if sdkaws.ToString(tag.Key) == "karpenter.sh/nodeclaim" && sdkaws.ToString(tag.Value) == claim {
				n++
			}
		}
	}
	return n
}
