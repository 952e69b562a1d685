package lifecycle

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition puts a node condition in a state since the world's now.
func (w *world) setCondition(claim string, typ corev1.NodeConditionType, status corev1.ConditionStatus) {
	w.t.Helper()
	w.cluster.mu.Lock()
	defer w.cluster.mu.Unlock()
	n := w.cluster.nodes["node-"+claim]
	n.Status.Conditions = slices.DeleteFunc(n.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == typ })
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(w.now())})
}

// Node repair is off unless its gate is on; on, an unhealthy node is
// replaced only after its condition's toleration, forcefully (grace zero)
// and whatever the budget (0 here).
func TestNodeRepairAfterToleration(t *testing.T) {
	w := newWorld(t, smPool("0"))
	w.initialized("r")
	w.setCondition("r", corev1.NodeReady, corev1.ConditionUnknown)
	w.advance(31 * time.Minute)
	if out := w.reconcile("r"); out.Done {
		t.Fatalf("repaired with the NodeRepair gate off: %+v", out)
	}

	w.c.s.NodeRepair = true
	w.setCondition("r", corev1.NodeReady, corev1.ConditionFalse) // a new state restarts its clock
	w.advance(29 * time.Minute)
	if out := w.reconcile("r"); out.Done || out.Action == ActionRepaired {
		t.Fatalf("repaired inside the 30-minute toleration: %+v", out)
	}
	w.advance(2 * time.Minute)
	w.want(w.reconcile("r"), Outcome{Claim: "r", Action: ActionRepaired, Done: true})
	w.wantGone("r", ReasonUnhealthy)
	w.wantTerminated("i-r")
	if g := w.tombstone("r").Claim.Spec.TerminationGracePeriod; g == nil || g.Duration != 0 {
		t.Errorf("repair was not forceful: terminationGracePeriod %v", g)
	}
}

// The monitoring agent's AcceleratedHardwareReady is tolerated 10 minutes.
func TestNodeRepairAcceleratedHardware(t *testing.T) {
	w := newWorld(t, smPool("0"))
	w.c.s.NodeRepair = true
	w.initialized("gpu")
	w.setCondition("gpu", "AcceleratedHardwareReady", corev1.ConditionFalse)
	w.advance(11 * time.Minute)
	w.want(w.reconcile("gpu"), Outcome{Claim: "gpu", Action: ActionRepaired, Done: true})
}

// More than 20 % of a NodePool unhealthy (rounded up: 1 of 5) is an outage,
// not a bad node: nothing is repaired, and each node says why. Once the
// share falls back, the remaining unhealthy node is repaired.
func TestNodeRepairBlockedWhenTooManyUnhealthy(t *testing.T) {
	w := newWorld(t, smPool("0"))
	w.c.s.NodeRepair = true
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		w.initialized(n)
	}
	w.setCondition("a", corev1.NodeReady, corev1.ConditionFalse)
	w.setCondition("b", corev1.NodeReady, corev1.ConditionUnknown)
	w.advance(31 * time.Minute)
	for _, n := range []string{"a", "b"} {
		if out := w.reconcile(n); out.Done || out.Action == ActionRepaired {
			t.Fatalf("node %s repaired with 2 of 5 nodes unhealthy: %+v", n, out)
		}
	}
	w.cluster.mu.Lock()
	events := slices.Clone(w.cluster.events)
	w.cluster.mu.Unlock()
	if !slices.Contains(events, "NodeRepairBlocked") {
		t.Errorf("no NodeRepairBlocked event among %v", events)
	}
	w.wantTerminated()

	w.setCondition("b", corev1.NodeReady, corev1.ConditionTrue)
	w.want(w.reconcile("a"), Outcome{Claim: "a", Action: ActionRepaired, Done: true})
	w.wantTerminated("i-a")
}

// impair makes the world's EC2 report the instances failing a status
// check since the world's now.
func (w *world) impair(ids ...string) {
	since := w.now()
	w.c.d.ImpairedInstances = func(context.Context) (map[string]time.Time, error) {
		out := map[string]time.Time{}
		for _, id := range ids {
			out[id] = since
		}
		return out, nil
	}
}

// An instance failing its EC2 status check is repaired once the check has
// failed for 120 s (Karpenter's UnhealthyThreshold), forcefully, only with
// the NodeRepair gate on, though its Node still reports Ready.
func TestNodeRepairOfAFailedStatusCheck(t *testing.T) {
	w := newWorld(t, smPool("0"))
	w.initialized("s")
	w.impair("i-s")
	w.advance(5 * time.Minute)
	if out := w.reconcile("s"); out.Done || out.Action == ActionRepaired {
		t.Fatalf("repaired with the NodeRepair gate off: %+v", out)
	}
	w.c.s.NodeRepair = true
	w.impair("i-s") // failing since now
	w.advance(time.Minute)
	if out := w.reconcile("s"); out.Done || out.Action == ActionRepaired {
		t.Fatalf("repaired inside the 120 s toleration: %+v", out)
	}
	w.advance(61 * time.Second)
	w.want(w.reconcile("s"), Outcome{Claim: "s", Action: ActionRepaired, Done: true})
	w.wantGone("s", ReasonUnhealthy)
	w.wantTerminated("i-s")
	if g := w.tombstone("s").Claim.Spec.TerminationGracePeriod; g == nil || g.Duration != 0 {
		t.Errorf("repair was not forceful: terminationGracePeriod %v", g)
	}
}

// Failed status checks count toward the 20 % guard: 2 of 5 instances
// impaired (an AZ's hardware, an AMI) is an outage, and none is replaced;
// a status read that fails repairs nothing on its account.
func TestStatusCheckRepairBlockedWhenTooManyFail(t *testing.T) {
	w := newWorld(t, smPool("0"))
	w.c.s.NodeRepair = true
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		w.initialized(n)
	}
	w.impair("i-a", "i-b")
	w.advance(10 * time.Minute)
	for _, n := range []string{"a", "b"} {
		if out := w.reconcile(n); out.Done || out.Action == ActionRepaired {
			t.Fatalf("node %s repaired with 2 of 5 instances impaired: %+v", n, out)
		}
	}
	w.c.d.ImpairedInstances = func(context.Context) (map[string]time.Time, error) { return nil, errors.New("throttled") }
	if out := w.reconcile("a"); out.Action == ActionRepaired {
		t.Fatalf("repaired on a failed status read: %+v", out)
	}
	w.wantTerminated()
	w.impair("i-a")
	w.advance(3 * time.Minute)
	w.want(w.reconcile("a"), Outcome{Claim: "a", Action: ActionRepaired, Done: true})
	w.wantTerminated("i-a")
}
