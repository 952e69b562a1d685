package interruption

import (
	"context"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/termination"
)

func TestProvisionLeaseRetriedThenReported(t *testing.T) {
	f := newFixture(t, "")
	f.passFn = func(n int) (provisioning.Result, error) {
		if n < 3 {
			return provisioning.Result{Skipped: "lease held"}, nil
		}
		return provisioning.Result{Launched: []string{"r"}}, nil
	}
	if got := failures(f.handle(t, spot("e1", instanceID))); len(got) != 0 || f.passes != 3 {
		t.Fatalf("failures %v after %d passes", got, f.passes)
	}

	// A lease that stays held: the drain still starts (the instance is
	// going) and the message is handled: redelivery would start nothing
	// new and, after three receives, put a handled message in the DLQ.
	// The provisioner's own runs replace the capacity.
	f = newFixture(t, "")
	f.passFn = func(int) (provisioning.Result, error) { return provisioning.Result{Skipped: "lease held"}, nil }
	if got := failures(f.handle(t, spot("e1", instanceID))); len(got) != 0 {
		t.Fatalf("failures %v, want the drained message handled", got)
	}
	if len(f.term.steps) != 1 {
		t.Errorf("drain not started: %v", f.term.steps)
	}
}

// TestInterruptedNodeDrainsBeforeThePass: when the replacement pass starts
// (it may wait up to ProvisionWait for the provisioner's lease), the
// interrupted node is already cordoned and tainted, so no pod is bound to
// it meanwhile; and the pass runs within the function's remaining time.
func TestInterruptedNodeDrainsBeforeThePass(t *testing.T) {
	f := newFixture(t, "")
	var cordoned, tainted bool
	f.passFn = func(int) (provisioning.Result, error) {
		n := f.node(t)
		cordoned, tainted = n.Spec.Unschedulable, termination.HasDisruptedTaint(n)
		return provisioning.Result{Launched: []string{"default-repl"}}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	if got := failures(f.handleCtx(t, ctx, spot("e1", instanceID))); len(got) != 0 {
		t.Fatalf("failures %v", got)
	}
	if f.passes != 1 || !cordoned || !tainted {
		t.Errorf("at the replacement pass (%d): cordoned %v, tainted %v; want both", f.passes, cordoned, tainted)
	}
	end, _ := ctx.Deadline()
	if got, ok := f.passCtx.Deadline(); !ok || got.After(end.Add(-passMargin)) {
		t.Errorf("pass deadline %v (%v), want at least %s before the function's %v", got, ok, passMargin, end)
	}
}

// TestBusyLeaseHandsThePassToTheProvisioner: a batch that only drains
// does not wait for a busy provisioner lease (holding one of the
// function's few executions while later spot warnings queue behind it):
// the node is drained, the provisioner nudged to run the pass, the
// message handled. A rebalance batch, which needs the pass's result,
// still waits.
func TestBusyLeaseHandsThePassToTheProvisioner(t *testing.T) {
	var nudges []queue.Message
	nudge := func(d *Deps) {
		d.Nudge = func(_ context.Context, m queue.Message, _ time.Duration) error {
			nudges = append(nudges, m)
			return nil
		}
	}
	f := newFixtureWith(t, "", nudge)
	f.passFn = func(int) (provisioning.Result, error) { return provisioning.Result{Skipped: "lease held"}, nil }
	if got := failures(f.handle(t, spot("e1", instanceID))); len(got) != 0 {
		t.Fatalf("failures %v, want the drained message handled", got)
	}
	if f.passes != 1 || len(nudges) != 1 || nudges[0].Kind != queue.KindProvision {
		t.Errorf("%d pass attempts and nudges %v; want one attempt and one provision nudge", f.passes, nudges)
	}
	if len(f.term.steps) != 1 || !f.node(t).Spec.Unschedulable {
		t.Errorf("drain not started: steps %v, cordoned %v", f.term.steps, f.node(t).Spec.Unschedulable)
	}

	nudges = nil
	f = newFixtureWith(t, RebalanceReplace, nudge)
	f.passFn = func(n int) (provisioning.Result, error) {
		if n < 3 {
			return provisioning.Result{Skipped: "lease held"}, nil
		}
		return provisioning.Result{Launched: []string{"r"}}, nil
	}
	if got := failures(f.handle(t, rebalance(instanceID))); len(got) != 0 || f.passes != 3 || len(nudges) != 0 {
		t.Fatalf("rebalance: failures %v, %d passes, nudges %v; want it to wait for the lease", got, f.passes, nudges)
	}
}
