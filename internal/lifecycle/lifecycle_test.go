package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
)

var t0 = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

func readyNode(taints ...corev1.Taint) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Spec:       corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		},
	}
}

func TestMergeRegistrationTaints(t *testing.T) {
	unreg := corev1.Taint{Key: apis.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}
	pool := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	startup := corev1.Taint{Key: "agent", Effect: corev1.TaintEffectNoSchedule}
	other := corev1.Taint{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule}

	got, changed := MergeRegistrationTaints([]corev1.Taint{unreg, other}, []corev1.Taint{pool}, []corev1.Taint{startup}, false)
	if !changed || len(got) != 3 || got[0].Key != other.Key || got[1].Key != "dedicated" || got[2].Key != "agent" {
		t.Fatalf("first registration: %v changed=%v", got, changed)
	}
	// Idempotent once applied.
	if again, changed := MergeRegistrationTaints(got, []corev1.Taint{pool}, []corev1.Taint{startup}, false); changed || len(again) != 3 {
		t.Fatalf("second merge changed %v", again)
	}
	// A registered node whose agent removed its startup taint keeps it off.
	if got, changed := MergeRegistrationTaints([]corev1.Taint{pool}, []corev1.Taint{pool}, []corev1.Taint{startup}, true); changed || len(got) != 1 {
		t.Fatalf("startup taint re-added after registration: %v", got)
	}
}

// A node whose kubelet registered the claim's taints itself (the launch
// labels it karpenter.sh/do-not-sync-taints) keeps the taints it has: an
// agent that removed its startup taint before registration ran must not
// find it back (kubernetes-sigs/karpenter #1772). Other nodes (Custom
// AMIs, whose user data is the user's) get the claim's taints.
func TestRegistrationTaintsHonourDoNotSync(t *testing.T) {
	pool := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	startup := corev1.Taint{Key: "agent", Effect: corev1.TaintEffectNoSchedule}
	cl := &apis.NodeClaim{Spec: apis.NodeClaimSpec{Taints: []corev1.Taint{pool}, StartupTaints: []corev1.Taint{startup}}}
	unreg := corev1.Taint{Key: apis.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}

	node := readyNode(pool, unreg) // the agent already removed its taint
	node.Labels = map[string]string{"karpenter.sh/do-not-sync-taints": "true"}
	taints, startupTaints := RegistrationTaints(node, cl)
	got, _ := MergeRegistrationTaints(node.Spec.Taints, taints, startupTaints, false)
	if len(got) != 1 || got[0].Key != pool.Key {
		t.Errorf("do-not-sync node: taints %v, want only %s (unregistered removed, startup taint not re-added)", got, pool.Key)
	}

	node.Labels = nil
	taints, startupTaints = RegistrationTaints(node, cl)
	if got, _ := MergeRegistrationTaints(node.Spec.Taints, taints, startupTaints, false); len(got) != 2 {
		t.Errorf("synced node: taints %v, want the pool's and the startup taint", got)
	}
}

func TestInitialized(t *testing.T) {
	cl := &apis.NodeClaim{Spec: apis.NodeClaimSpec{
		StartupTaints: []corev1.Taint{{Key: "agent", Effect: corev1.TaintEffectNoSchedule}},
		Resources:     apis.ResourceRequirements{Requests: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")}},
	}}
	n := readyNode(corev1.Taint{Key: "agent", Effect: corev1.TaintEffectNoSchedule})
	if ok, why := Initialized(cl, n); ok || why == "" {
		t.Fatal("initialized with a startup taint")
	}
	n.Spec.Taints = nil
	if ok, _ := Initialized(cl, n); ok {
		t.Fatal("initialized without the requested GPU registered")
	}
	n.Status.Allocatable["nvidia.com/gpu"] = resource.MustParse("1")
	if ok, why := Initialized(cl, n); !ok {
		t.Fatalf("not initialized: %s", why)
	}
	n.Status.Conditions[0].Status = corev1.ConditionFalse
	if ok, _ := Initialized(cl, n); ok {
		t.Fatal("initialized while NotReady")
	}
	n.Status.Conditions[0].Status = corev1.ConditionTrue
	n.Spec.Taints = []corev1.Taint{{Key: apis.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}}
	if ok, _ := Initialized(cl, n); ok {
		t.Fatal("initialized while unregistered")
	}
	n.Spec.Taints = []corev1.Taint{{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}}
	if ok, _ := Initialized(cl, n); ok {
		t.Fatal("initialized while the node lifecycle controller's not-ready taint is still on")
	}
}

func pod(name string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: k8stypes.UID("uid-" + name)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func daemonPod(p *corev1.Pod) {
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds"}}
}

func TestPodSetDigest(t *testing.T) {
	a := PodSetDigest([]*corev1.Pod{pod("a"), pod("b")})
	if a != PodSetDigest([]*corev1.Pod{pod("b"), pod("a")}) {
		t.Error("digest depends on order")
	}
	if a == PodSetDigest([]*corev1.Pod{pod("a")}) || PodSetDigest(nil) == a {
		t.Error("digest blind to a pod leaving")
	}
	done := pod("b", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
	if PodSetDigest([]*corev1.Pod{pod("a"), done}) != PodSetDigest([]*corev1.Pod{pod("a")}) {
		t.Error("finished pods change the digest")
	}
}

func emptyPool(after time.Duration, budgets ...apis.Budget) *apis.NodePool {
	np := &apis.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Disruption = apis.Disruption{ConsolidationPolicy: apis.ConsolidationPolicyWhenEmpty, ConsolidateAfter: apis.DurationOf(after), Budgets: budgets}
	return np
}

func initializedClaim(lastPodEvent time.Time) *apis.NodeClaim {
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	cl.SetCondition(apis.ConditionInitialized, metav1.ConditionTrue, "Initialized", "", metav1.NewTime(t0))
	cl.Status.LastPodEventTime = metav1.NewTime(lastPodEvent)
	return cl
}

func TestEmptyCandidate(t *testing.T) {
	np := emptyPool(30 * time.Second)
	n := readyNode()
	cl := initializedClaim(t0)
	if c := EmptyCandidate(cl, np, n, nil, t0.Add(10*time.Second)); c.Candidate || c.Wait != 20*time.Second {
		t.Errorf("within consolidateAfter: %+v", c)
	}
	if c := EmptyCandidate(cl, np, n, []*corev1.Pod{pod("ds", daemonPod)}, t0.Add(30*time.Second)); !c.Candidate {
		t.Errorf("daemon-only node after consolidateAfter: %+v", c)
	}
	if c := EmptyCandidate(cl, np, n, []*corev1.Pod{pod("web")}, t0.Add(time.Hour)); c.Candidate {
		t.Error("busy node is a candidate")
	}
	dnd := pod("ds", daemonPod, func(p *corev1.Pod) { p.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"} })
	if c := EmptyCandidate(cl, np, n, []*corev1.Pod{dnd}, t0.Add(time.Hour)); c.Candidate {
		t.Error("do-not-disrupt pod ignored")
	}
	young := pod("ds", daemonPod, func(p *corev1.Pod) {
		p.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "2h"}
		p.CreationTimestamp = metav1.NewTime(t0)
	})
	if c := EmptyCandidate(cl, np, n, []*corev1.Pod{young}, t0.Add(time.Hour)); c.Candidate {
		t.Error("do-not-disrupt duration ignored while it runs")
	}
	if c := EmptyCandidate(cl, np, n, []*corev1.Pod{young}, t0.Add(3*time.Hour)); !c.Candidate {
		t.Errorf("do-not-disrupt duration kept protecting after it ran out: %+v", c)
	}
	never := emptyPool(0)
	never.Spec.Disruption.ConsolidateAfter = apis.NeverDuration()
	if c := EmptyCandidate(cl, never, n, nil, t0.Add(time.Hour)); c.Candidate {
		t.Error("consolidateAfter Never acted on")
	}
	uninit := &apis.NodeClaim{}
	if c := EmptyCandidate(uninit, np, n, nil, t0.Add(time.Hour)); c.Candidate {
		t.Error("uninitialized claim is a candidate")
	}
	deleting := initializedClaim(t0)
	deleting.MarkForDeletion(apis.DeletionReasonDrifted, "", metav1.NewTime(t0))
	if c := EmptyCandidate(deleting, np, n, nil, t0.Add(time.Hour)); c.Candidate {
		t.Error("deleting claim is a candidate")
	}
	disrupting := initializedClaim(t0)
	disrupting.SetCondition(apis.ConditionDisrupting, metav1.ConditionTrue, string(apis.DisruptionReasonDrifted), "", metav1.NewTime(t0))
	if c := EmptyCandidate(disrupting, np, n, nil, t0.Add(time.Hour)); c.Candidate {
		t.Error("claim the disruption controller is replacing is an emptiness candidate")
	}
}

func TestAllowedDisruptions(t *testing.T) {
	claims := make([]*apis.NodeClaim, 10)
	for i := range claims {
		claims[i] = initializedClaim(t0)
	}
	allReady := func(*apis.NodeClaim) bool { return true }
	np := emptyPool(0, apis.Budget{Nodes: "20%"})
	if n, err := AllowedDisruptions(np, claims, allReady, apis.DisruptionReasonEmpty, t0); err != nil || n != 2 {
		t.Fatalf("20%% of 10 = %d %v, want 2", n, err)
	}
	claims[0].MarkForDeletion(apis.DeletionReasonEmpty, "", metav1.NewTime(t0))
	notReady := func(cl *apis.NodeClaim) bool { return cl != claims[1] }
	if n, _ := AllowedDisruptions(np, claims, notReady, apis.DisruptionReasonEmpty, t0); n != 0 {
		t.Fatalf("deleting and NotReady nodes not counted against the budget: %d", n)
	}
	// A replacement in progress (Disrupting, not yet deleting) spends the
	// budget too: 20% of 10 with one disrupting leaves one.
	claims[0] = initializedClaim(t0)
	claims[0].SetCondition(apis.ConditionDisrupting, metav1.ConditionTrue, string(apis.DisruptionReasonUnderutilized), "replacing", metav1.NewTime(t0))
	if n, _ := AllowedDisruptions(np, claims, allReady, apis.DisruptionReasonEmpty, t0); n != 1 {
		t.Fatalf("Disrupting node not counted against the budget: %d allowed, want 1", n)
	}
	// A budget for another reason does not apply; a scheduled zero budget
	// outside its window does not either.
	sched, dur := "0 9 * * *", metav1.Duration{Duration: time.Hour}
	np = emptyPool(0, apis.Budget{Nodes: "0", Reasons: []apis.DisruptionReason{apis.DisruptionReasonDrifted}},
		apis.Budget{Nodes: "0", Schedule: &sched, Duration: &dur})
	if n, _ := AllowedDisruptions(np, claims[2:], allReady, apis.DisruptionReasonEmpty, t0); n != 8 {
		t.Fatalf("inactive budgets applied: %d", n)
	}
	if n, _ := AllowedDisruptions(np, claims[2:], allReady, apis.DisruptionReasonEmpty, t0.Add(8*time.Hour+time.Minute)); n != 0 {
		t.Fatalf("active scheduled budget ignored: %d", n)
	}
}
