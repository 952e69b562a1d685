package lifecycle_test

import (
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// End to end on the local cloud, as the stack's controller role: an
// instance whose EC2 instance status check has failed for longer than 120 s
// is repaired (its claim deleted, the instance terminated) though its Node
// reports Ready and runs a pod, once NodeRepair is on; with the gate off
// nothing happens.
func TestFailedStatusCheckRepairedEndToEnd(t *testing.T) {
	e := newEnv(t)
	d := e.deps()
	d.ImpairedInstances = e.p.ImpairedInstances
	c := e.newController(d)
	cl := e.launchClaim("status")
	cl, n := e.initialized(c, cl.Name)
	e.runningPod("busy", n.Name, nil) // not empty: only repair may remove it
	if err := e.cloud.AWS.EC2().FailStatusCheck(cl.Status.InstanceID, false, time.Now().Add(-5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Reconcile(e.ctx, cl.Name); err != nil || out.Action == lifecycle.ActionRepaired || e.gone(cl.Name) {
		t.Fatalf("repaired with the NodeRepair gate off: %+v %v", out, err)
	}

	d.Settings.NodeRepair = true
	c = e.newController(d)
	e.reconcileUntil(c, cl.Name, "repaired", func(_ lifecycle.Outcome, got *apis.NodeClaim) bool { return got == nil })
	if n := e.terminateCalls(cl.Status.InstanceID); n == 0 {
		t.Errorf("instance %s of the repaired claim was not terminated", cl.Status.InstanceID)
	}
	if st := e.instanceState(cl.Status.InstanceID); st != "shutting-down" && st != "terminated" {
		t.Errorf("instance state %s after repair", st)
	}
}
