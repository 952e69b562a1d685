package aws_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// TestTerminateOfAnInstanceNotVisibleYet: right after a launch EC2 does not
// show the instance (simulator rule launch-consistency), so Terminate
// cannot act on it and says so (ErrInstanceNotVisible) instead of counting
// it as terminated; within the consistency window the caller must not take
// it as gone. Once EC2 shows it, Terminate terminates it.
func TestTerminateOfAnInstanceNotVisibleYet(t *testing.T) {
	e := newEnvWith(t, false, func(o *awssim.Options) { o.Delays.Consistency = 2 * time.Second })
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("unseen-1"), NodeClass: nodeClass("al2023@latest"), InstanceTypes: e.types("m5.large")})
	if err != nil {
		t.Fatal(err)
	}
	launched := time.Now()
	err = e.p.Terminate(e.ctx, inst.ID)
	if !errors.Is(err, nwaws.ErrInstanceNotVisible) {
		t.Fatalf("terminate right after the launch: %v, want ErrInstanceNotVisible", err)
	}
	if e.p.InvisibleLongEnough(launched, time.Now()) {
		t.Fatal("an instance launched just now counts as gone")
	}
	if !e.p.InvisibleLongEnough(launched.Add(-time.Hour), time.Now()) || !e.p.InvisibleLongEnough(time.Time{}, time.Now()) {
		t.Fatal("an instance launched an hour ago (or at an unknown time) does not count as gone")
	}
	if n := len(e.sim.Calls("ec2", "TerminateInstances")); n != 0 {
		t.Fatalf("%d TerminateInstances calls for an instance Terminate could not see", n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := e.p.GetInstance(e.ctx, inst.ID); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("instance never became visible: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := e.p.Terminate(e.ctx, inst.ID); err != nil {
		t.Fatalf("terminate once visible: %v", err)
	}
	got, err := e.p.GetInstance(e.ctx, inst.ID)
	if err != nil || (got.State != "shutting-down" && got.State != "terminated") {
		t.Fatalf("after terminate: %+v %v", got, err)
	}
}
