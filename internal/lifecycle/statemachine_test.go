package lifecycle

import (
	"bytes"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

var agentTaint = corev1.Taint{Key: "example.com/agent", Effect: corev1.TaintEffectNoSchedule}

func expireAfter(d time.Duration) func(*apis.NodeClaim) {
	return func(cl *apis.NodeClaim) { cl.Spec.ExpireAfter = apis.DurationOf(d) }
}

// A claim that never launches waits out LaunchTimeout, then goes.
func TestStateMachineLaunchTimeout(t *testing.T) {
	w := newWorld(t, smPool("10"))
	w.claim("a")
	w.timeline("a",
		at{0, Outcome{Action: ActionWaiting, RequeueAfter: 5 * time.Minute}},
		at{4 * time.Minute, Outcome{Action: ActionWaiting, RequeueAfter: time.Minute}},
		at{time.Minute, Outcome{Action: ActionLiveness, Done: true}})
	w.wantGone("a", ReasonLaunchTimeout)
	w.wantTerminated()
}

// A launched claim whose Node never registers is polled ever less often
// (a tenth of the wait, 2 s to 15 s) and terminated after RegistrationTTL.
func TestStateMachineRegistrationTimeout(t *testing.T) {
	w := newWorld(t, smPool("10"))
	w.launched("b")
	w.timeline("b",
		at{0, Outcome{Action: ActionWaiting, RequeueAfter: 2 * time.Second}},
		at{time.Minute, Outcome{Action: ActionWaiting, RequeueAfter: 6 * time.Second}},
		at{9 * time.Minute, Outcome{Action: ActionWaiting, RequeueAfter: 15 * time.Second}},
		at{5 * time.Minute, Outcome{Action: ActionLiveness, Done: true}})
	w.wantGone("b", ReasonRegistrationTimeout)
	w.wantTerminated("i-b")
}

// Registration syncs the claim's labels and taints onto the Node and lifts
// the unregistered taint; initialization waits for the startup taint to go
// and records the Node's allocatable.
func TestStateMachineRegistersThenInitializes(t *testing.T) {
	w := newWorld(t, smPool("10"))
	cl := w.launched("c")
	node := w.kubelet(cl, agentTaint).Name
	w.want(w.reconcile("c"), Outcome{Claim: "c", Action: ActionRegistered, RequeueAfter: 2 * time.Second})
	n, _ := w.cluster.node(node)
	for k, v := range map[string]string{apis.NodeRegisteredLabel: "true", "team": "payments", apis.NodePoolLabelKey: "default"} {
		if n.Labels[k] != v {
			t.Errorf("node label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if hasTaint(n, apis.UnregisteredTaintKey) || !hasTaint(n, "dedicated") || !hasTaint(n, agentTaint.Key) {
		t.Errorf("node taints after registration: %v", n.Spec.Taints)
	}
	if cl = w.get("c"); !cl.IsTrue(apis.ConditionRegistered) || cl.Status.NodeName != node {
		t.Fatalf("claim after registration: %+v", cl.Status)
	}

	w.advance(time.Second)
	w.want(w.reconcile("c"), Outcome{Claim: "c", Action: ActionWaiting, RequeueAfter: 2 * time.Second})
	w.removeTaint(node, agentTaint.Key)
	// Initialized, then the emptiness phase starts the node's clock: it is
	// empty, so it asks to be looked at when consolidateAfter runs out.
	w.want(w.reconcile("c"), Outcome{Claim: "c", Action: ActionInitialized, RequeueAfter: 30 * time.Second})
	n, _ = w.cluster.node(node)
	if cl = w.get("c"); !cl.IsTrue(apis.ConditionInitialized) || n.Labels[apis.NodeInitializedLabel] != "true" {
		t.Fatalf("claim or node not initialized: %+v %v", cl.Status.Conditions, n.Labels)
	}
	if !cl.Status.Allocatable.Cpu().Equal(*n.Status.Allocatable.Cpu()) {
		t.Errorf("claim allocatable %v, node %v", cl.Status.Allocatable, n.Status.Allocatable)
	}
	obs, err := w.store.ObservedCapacities(w.ctx)
	if err != nil || len(obs) != 1 || obs[0].InstanceType != "m5.large" || obs[0].NodeName != node {
		t.Errorf("observed capacity %+v %v", obs, err)
	}
}

// Expiration is forceful: past expireAfter the claim goes whatever the
// budget says, and the disruption is counted.
func TestStateMachineExpiry(t *testing.T) {
	w := newWorld(t, smPool("0"))
	w.initialized("d", expireAfter(time.Hour))
	w.advance(time.Hour)
	w.want(w.reconcile("d"), Outcome{Claim: "d", Action: ActionExpired, Done: true})
	w.wantGone("d", apis.DeletionReasonExpired)
	if err := w.c.d.Metrics.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(w.metrics.Bytes(), []byte(metrics.NodeClaimsDisrupted)) || !bytes.Contains(w.metrics.Bytes(), []byte(apis.DeletionReasonExpired)) {
		t.Errorf("no expiry disruption metric in %s", w.metrics.String())
	}
}

// `kubectl delete node`: registration put Karpenter's termination finalizer
// on the Node, so the Node waits, marked, while the claim is terminated
// through the drain; the finalizer comes off last and the Node goes.
func TestStateMachineNodeDeleted(t *testing.T) {
	w := newWorld(t, smPool("0"))
	node := w.initialized("e").Status.NodeName
	if n, _ := w.cluster.node(node); !slices.Contains(n.Finalizers, apis.TerminationFinalizer) {
		t.Fatalf("registered node has no %s finalizer: %v", apis.TerminationFinalizer, n.Finalizers)
	}
	w.cluster.deleteNode(node)
	if n, ok := w.cluster.node(node); !ok || n.DeletionTimestamp == nil {
		t.Fatal("the finalizer did not hold the node")
	}
	w.want(w.reconcile("e"), Outcome{Claim: "e", Action: ActionNodeDeleted, Done: true})
	w.wantGone("e", ReasonNodeDeleted)
	w.wantTerminated("i-e")
	if _, ok := w.cluster.node(node); ok {
		t.Error("node still there: its finalizer was not released")
	}
}

// A registered claim whose Node was deleted past its finalizer (removed by
// hand) keeps its instance for GCGrace (the Node may come back), then ends
// and terminates it.
func TestStateMachineNodeForceDeleted(t *testing.T) {
	w := newWorld(t, smPool("0"))
	w.cluster.forceDeleteNode(w.initialized("e").Status.NodeName)
	w.timeline("e",
		at{10 * time.Second, Outcome{Action: ActionWaiting, RequeueAfter: 20 * time.Second}},
		at{20 * time.Second, Outcome{Action: ActionNodeDeleted, Done: true}})
	w.wantGone("e", ReasonNodeDeleted)
	w.wantTerminated("i-e")
}

// A claim whose instance vanished goes with its Node, without a drain;
// before GCGrace after the launch the instance is not even looked up.
func TestStateMachineVanishedInstance(t *testing.T) {
	w := newWorld(t, smPool("0"))
	cl := w.initialized("f")
	w.cloud.vanish("i-f")
	if out := w.reconcile("f"); out.Done {
		t.Fatalf("claim collected inside GCGrace: %+v", out)
	}
	w.advance(30 * time.Second)
	w.want(w.reconcile("f"), Outcome{Claim: "f", Action: ActionVanished, Done: true})
	if _, ok := w.cluster.node(cl.Status.NodeName); ok {
		t.Error("the node of the vanished instance is still there")
	}
	ts := w.tombstone("f")
	if c := ts.Claim.Condition(termination.ConditionInstanceTerminating); c == nil || c.Reason != "InstanceNotFound" {
		t.Errorf("tombstone condition %+v", c)
	}
	w.wantTerminated()
}

// A claim marked for deletion is terminated through the termination
// workflow: an empty node drains at once, the instance and Node go.
func TestStateMachineTerminatesMarked(t *testing.T) {
	w := newWorld(t, smPool("10"))
	cl := w.initialized("g")
	if _, _, err := termination.Mark(w.ctx, w.store, "g", apis.DeletionReasonManual, "test", w.now()); err != nil {
		t.Fatal(err)
	}
	w.want(w.reconcile("g"), Outcome{Claim: "g", Action: ActionTerminated, Done: true})
	w.wantGone("g", apis.DeletionReasonManual)
	w.wantTerminated("i-g")
	if _, ok := w.cluster.node(cl.Status.NodeName); ok {
		t.Error("node left behind")
	}
	w.want(w.reconcile("g"), Outcome{Claim: "g", Action: ActionNotFound, Done: true})
}

// An empty node of a WhenEmpty pool goes once consolidateAfter has passed
// since its last pod event, within the pool's budget.
func TestStateMachineEmptiness(t *testing.T) {
	for _, tc := range []struct {
		budget string
		want   Outcome
		events []string
	}{
		{budget: "10", want: Outcome{Action: ActionEmpty, Done: true}, events: []string{termination.ReasonDisrupting, termination.ReasonTerminating}},
		{budget: "0", want: Outcome{Action: ActionBudgetBlocks}, events: []string{"DisruptionBlocked"}},
	} {
		t.Run("budget "+tc.budget, func(t *testing.T) {
			w := newWorld(t, smPool(tc.budget))
			w.initialized("h")
			w.timeline("h", at{29 * time.Second, Outcome{RequeueAfter: time.Second}}, at{time.Second, tc.want})
			if !slices.Equal(w.cluster.events, tc.events) {
				t.Errorf("node events %v, want %v", w.cluster.events, tc.events)
			}
		})
	}
}

// Another invocation holding the emptiness lease defers the decision by a
// poll interval.
func TestStateMachineEmptinessLeaseHeld(t *testing.T) {
	w := newWorld(t, smPool("10"))
	w.initialized("i")
	if _, err := w.store.AcquireLease(w.ctx, store.EmptinessLease, "another", time.Minute); err != nil {
		t.Fatal(err)
	}
	w.timeline("i", at{30 * time.Second, Outcome{RequeueAfter: 2 * time.Second}})
}

// A pod arriving or leaving restarts the node's emptiness clock.
func TestStateMachinePodEventsRestartTheClock(t *testing.T) {
	w := newWorld(t, smPool("10"))
	cl := w.initialized("j")
	w.advance(20*time.Second + 300*time.Millisecond)
	w.cluster.setPods(cl.Status.NodeName, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", UID: "u1"}})
	w.timeline("j", at{0, Outcome{}})
	if got, want := w.get("j").Status.LastPodEventTime.Time, sm0.Add(21*time.Second); !got.Equal(want) {
		t.Errorf("last pod event %v, want %v (rounded up to the second)", got, want)
	}
	w.cluster.setPods(cl.Status.NodeName)
	w.timeline("j", at{9700 * time.Millisecond, Outcome{RequeueAfter: 30 * time.Second}})
}

// The phases' order decides between claims in several states at once: a
// claim marked for deletion whose instance vanished is collected without
// a drain, and an expired claim that never launched times out instead.
func TestStateMachinePhaseOrder(t *testing.T) {
	w := newWorld(t, smPool("10"))
	w.initialized("k")
	if _, _, err := termination.Mark(w.ctx, w.store, "k", apis.DeletionReasonDrifted, "test", w.now()); err != nil {
		t.Fatal(err)
	}
	w.cloud.vanish("i-k")
	w.timeline("k", at{time.Minute, Outcome{Action: ActionVanished, Done: true}})

	w.claim("l", expireAfter(time.Minute))
	w.timeline("l", at{5 * time.Minute, Outcome{Action: ActionLiveness, Done: true}})
	w.wantGone("l", ReasonLaunchTimeout)
}

// Each phase hands a claim it has nothing to do for on to the next one,
// untouched and without calling anything.
func TestPhasesHandOn(t *testing.T) {
	w := newWorld(t, smPool("10"))
	launched := w.launched("m")
	registered := launched.DeepCopy()
	registered.SetCondition(apis.ConditionRegistered, metav1.ConditionTrue, "Registered", "", metav1.NewTime(w.now()))
	registered.SetCondition(apis.ConditionInitialized, metav1.ConditionTrue, "Initialized", "", metav1.NewTime(w.now()))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	for _, tc := range []struct {
		name  string
		phase claimPhase
		s     claimState
	}{
		{"collectVanished: not launched", (*Controller).collectVanished, claimState{cl: w.claim("n")}},
		{"collectVanished: inside GCGrace", (*Controller).collectVanished, claimState{cl: launched, launched: true, launchedAt: w.now()}},
		{"terminateMarked: not marked", (*Controller).terminateMarked, claimState{cl: launched}},
		{"launchLiveness: launched", (*Controller).launchLiveness, claimState{cl: launched, launched: true}},
		{"expiry: no expireAfter", (*Controller).expiry, claimState{cl: launched}},
		{"registration: registered", (*Controller).registration, claimState{cl: registered, node: node}},
		{"nodeLiveness: node present", (*Controller).nodeLiveness, claimState{cl: registered, node: node}},
		{"initialization: initialized", (*Controller).initialization, claimState{cl: registered, node: node}},
		{"poolRemoved: its NodePool configured", (*Controller).poolRemoved, claimState{cl: registered, node: node}},
	} {
		s := tc.s
		s.now, s.log, s.out = w.now(), w.c.log, Outcome{Claim: s.cl.Name}
		s.v = &lazyView{c: w.c}
		done, err := tc.phase(w.c, w.ctx, &s)
		if done || err != nil || s.out != (Outcome{Claim: s.cl.Name}) || s.cl != tc.s.cl {
			t.Errorf("%s: done=%v err=%v out=%+v", tc.name, done, err, s.out)
		}
	}
	w.wantTerminated()
	if len(w.cluster.events) != 0 {
		t.Errorf("a phase that hands on sent events %v", w.cluster.events)
	}
}
