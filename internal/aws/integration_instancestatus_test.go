package aws_test

import (
	"testing"
	"time"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// ImpairedInstances lists, over the EC2 wire, the instances whose instance
// or system status check fails, each since its earliest failure; healthy
// instances are not listed, and a passing check again takes it off.
func TestImpairedInstancesOverTheWire(t *testing.T) {
	e := newEnv(t, false)
	var ids []string
	for _, name := range []string{"status-a", "status-b", "status-c"} {
		inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim(name), NodeClass: nodeClass("al2023@latest"), InstanceTypes: e.types("m5.large")})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	// DescribeInstanceStatus lists running instances only (without
	// IncludeAllInstances): wait for them to leave pending.
	for _, id := range ids {
		deadline := time.Now().Add(30 * time.Second)
		for {
			if inst, err := e.p.GetInstance(e.ctx, id); err == nil && inst.State == "running" {
				break
			} else if time.Now().After(deadline) {
				t.Fatalf("%s never running: %+v %v", id, inst, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	sinceA, sinceB := time.Now().Add(-5*time.Minute).UTC().Truncate(time.Second), time.Now().Add(-time.Minute).UTC().Truncate(time.Second)
	ec2c := e.sim.EC2()
	if err := ec2c.FailStatusCheck(ids[0], false, sinceA); err != nil {
		t.Fatal(err)
	}
	if err := ec2c.FailStatusCheck(ids[1], true, sinceB); err != nil {
		t.Fatal(err)
	}
	got, err := e.p.ImpairedInstances(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[ids[0]].Equal(sinceA) || !got[ids[1]].Equal(sinceB) {
		t.Fatalf("impaired %v, want %s since %s and %s since %s", got, ids[0], sinceA, ids[1], sinceB)
	}
	ec2c.PassStatusChecks(ids[0])
	if got, err = e.p.ImpairedInstances(e.ctx); err != nil || len(got) != 1 {
		t.Fatalf("after a passing check: %v %v, want only %s", got, err, ids[1])
	}
}
