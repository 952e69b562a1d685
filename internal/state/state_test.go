package state_test

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// loadConfig loads the package's pool: "default", on-demand m5.large or
// m5.xlarge, with limits (nil: none), on the default node class.
func loadConfig(t *testing.T, limits map[string]string) *apis.Config {
	t.Helper()
	pool := apistest.Pool{Requirements: []apistest.Req{
		apistest.In(catalog.LabelInstanceType, "m5.large", "m5.xlarge"),
		apistest.In(catalog.LabelCapacityType, "on-demand"),
	}, Limits: limits}
	return apistest.Load(t, apistest.Doc(pool.YAML(), apistest.NodeClass{}.YAML()))
}

func builtin(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	return cat
}

func pendingPod(name, cpu string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("256Mi")},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		}}},
	}
}

func boundPod(name, node, cpu string) *corev1.Pod {
	p := pendingPod(name, cpu)
	p.Spec.NodeName = node
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning}
	return p
}

// launchedClaim is a claim whose instance exists but whose Node has not
// registered: what the provisioner records after CreateFleet.
func launchedClaim(name, instanceType, zone, instanceID string) *apis.NodeClaim {
	cl := &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			apis.NodePoolLabelKey: "default", catalog.LabelInstanceType: instanceType,
			catalog.LabelTopologyZone: zone, apis.CapacityTypeLabelKey: "on-demand",
		}},
		Spec: apis.NodeClaimSpec{
			NodeClassRef: &apis.NodeClassReference{Group: apis.AWSGroup, Kind: apis.EC2NodeClassKind, Name: "default"},
			Requirements: []apis.NodeSelectorRequirementWithMinValues{{Key: catalog.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{instanceType}}},
		},
	}
	cl.Status.InstanceID = instanceID
	cl.Status.ProviderID = "aws:///" + zone + "/" + instanceID
	cl.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched", "", metav1.Now())
	return cl
}

// registeredNode is an initialized m5.large Node of the default pool on
// instance id in zone.
func registeredNode(name, zone, id string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apis.NodePoolLabelKey: "default", catalog.LabelHostname: name,
			apis.NodeRegisteredLabel: "true", apis.NodeInitializedLabel: "true"}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///" + zone + "/" + id},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("29")},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
		},
	}
}

func snapshot(pending []*corev1.Pod, nodes []*corev1.Node, bound ...*corev1.Pod) *kube.Snapshot {
	s := &kube.Snapshot{PendingPods: pending, Nodes: nodes, PodsByNode: map[string][]*corev1.Pod{}, TakenAt: time.Now()}
	for _, p := range bound {
		s.PodsByNode[p.Spec.NodeName] = append(s.PodsByNode[p.Spec.NodeName], p)
	}
	return s
}

func solve(t *testing.T, c *state.Cluster, o state.InputOptions) *scheduling.Plan {
	t.Helper()
	in, err := c.Input(o)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := scheduling.Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return plan
}

// Pods waiting for a booting node go to that node's capacity, not to a
// second claim.
func TestInFlightClaimAbsorbsItsPods(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	// m5.large: 2 vCPU, ~1930m allocatable. Three 500m pods fit.
	pods := []*corev1.Pod{pendingPod("a", "500m"), pendingPod("b", "500m"), pendingPod("c", "500m")}
	c, err := state.Build(state.Sources{Snapshot: snapshot(pods, nil), Config: cfg, Catalog: cat,
		Claims: []*apis.NodeClaim{launchedClaim("default-aaaaa", "m5.large", "us-west-2a", "i-1")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 1 || !c.Nodes[0].InFlight() || c.Nodes[0].Initialized() {
		t.Fatalf("want one in-flight, uninitialized node, got %+v", c.Nodes)
	}
	en := c.Nodes[0].Existing()
	if en.Labels[catalog.LabelHostname] != "default-aaaaa" || en.Labels[apis.NodePoolLabelKey] != "default" {
		t.Errorf("in-flight labels = %v", en.Labels)
	}
	if cpu := en.Allocatable.Cpu(); cpu.MilliValue() < 1800 || cpu.MilliValue() >= 2000 {
		t.Errorf("in-flight allocatable cpu = %s, want m5.large's (~1930m)", cpu)
	}
	plan := solve(t, c, state.InputOptions{})
	if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 0 {
		t.Fatalf("want no new claims, got %d claims, unschedulable %v", len(plan.NodeClaims), plan.Unschedulable)
	}
	if len(plan.ExistingNodes) != 1 || plan.ExistingNodes[0].Name != "default-aaaaa" || len(plan.ExistingNodes[0].Pods) != 3 {
		t.Fatalf("want the three pods on the in-flight claim, got %+v", plan.ExistingNodes)
	}

	// A fourth and fifth pod overflow the claim: exactly one new claim.
	pods = append(pods, pendingPod("d", "500m"), pendingPod("e", "500m"))
	c, err = state.Build(state.Sources{Snapshot: snapshot(pods, nil), Config: cfg, Catalog: cat,
		Claims: []*apis.NodeClaim{launchedClaim("default-aaaaa", "m5.large", "us-west-2a", "i-1")}})
	if err != nil {
		t.Fatal(err)
	}
	plan = solve(t, c, state.InputOptions{})
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("want one new claim for the overflow, got %d", len(plan.NodeClaims))
	}
}

// An unlaunched claim (planned, crash before CreateFleet) offers the
// smallest allocatable of its options and is charged the largest capacity.
func TestUnlaunchedClaimResources(t *testing.T) {
	cfg, cat := loadConfig(t, map[string]string{"cpu": "6"}), builtin(t)
	cl := &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "default-bbbbb", Labels: map[string]string{apis.NodePoolLabelKey: "default"}},
		Spec: apis.NodeClaimSpec{
			NodeClassRef: &apis.NodeClassReference{Name: "default"},
			Requirements: []apis.NodeSelectorRequirementWithMinValues{
				{Key: catalog.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}},
				{Key: apis.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			},
		},
	}
	c, err := state.Build(state.Sources{Snapshot: snapshot(nil, nil), Config: cfg, Catalog: cat, Claims: []*apis.NodeClaim{cl}})
	if err != nil {
		t.Fatal(err)
	}
	n, ok := c.NodeForClaim("default-bbbbb")
	if !ok || !n.InFlight() || n.Launched() {
		t.Fatalf("want an in-flight unlaunched node, got %+v", n)
	}
	en := n.Existing()
	if got := en.Allocatable.Cpu().MilliValue(); got >= 2000 {
		t.Errorf("allocatable cpu %dm: want m5.large's, the smaller option", got)
	}
	if got := en.Capacity.Cpu().Value(); got != 4 {
		t.Errorf("capacity cpu %d: want m5.xlarge's 4, the larger option", got)
	}
	if en.Labels[apis.CapacityTypeLabelKey] != "on-demand" {
		t.Errorf("single-valued requirement not a label: %v", en.Labels)
	}
	if got := c.Capacity("default"); got.Cpu().Value() != 4 || got.Name("nodes", resource.DecimalSI).Value() != 1 {
		t.Errorf("pool capacity = %v", got)
	}
	// The limit (6 CPUs) minus the claim's 4 leaves no room for a 4-CPU
	// m5.xlarge, and m5.large (2) fits only pods of up to ~1.9 CPUs.
	plan := solve(t, c, state.InputOptions{Pods: []*corev1.Pod{pendingPod("big", "3")}})
	if len(plan.NodeClaims) != 0 || len(plan.Unschedulable) != 1 {
		t.Fatalf("want the 3-CPU pod unschedulable under the limit, got claims %d unschedulable %v", len(plan.NodeClaims), plan.Unschedulable)
	}
	if !strings.Contains(plan.Unschedulable[0].Reason, "limit") {
		t.Errorf("reason %q does not mention the limit", plan.Unschedulable[0].Reason)
	}
	// Without the limit the same pod gets a claim.
	c, err = state.Build(state.Sources{Snapshot: snapshot(nil, nil), Config: loadConfig(t, nil), Catalog: cat, Claims: []*apis.NodeClaim{cl}})
	if err != nil {
		t.Fatal(err)
	}
	if plan := solve(t, c, state.InputOptions{Pods: []*corev1.Pod{pendingPod("big", "3")}}); len(plan.NodeClaims) != 1 {
		t.Fatalf("unlimited pool: want one claim, got %d (%v)", len(plan.NodeClaims), plan.Unschedulable)
	}
}

func TestRegisteredClaimMatchedByProviderID(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	cl := launchedClaim("default-ccccc", "m5.large", "us-west-2b", "i-2")
	cl.SetCondition(apis.ConditionRegistered, metav1.ConditionTrue, "Registered", "", metav1.Now())
	cl.SetCondition(apis.ConditionInitialized, metav1.ConditionTrue, "Initialized", "", metav1.Now())
	node := registeredNode("ip-10-0-0-1", "us-west-2b", "i-2")
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "unmanaged"}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}
	gone := launchedClaim("default-ddddd", "m5.large", "us-west-2b", "i-3")
	gone.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	failed := launchedClaim("default-eeeee", "m5.large", "us-west-2b", "")
	failed.SetCondition(apis.ConditionLaunched, metav1.ConditionFalse, "InsufficientCapacity", "", metav1.Now())

	c, err := state.Build(state.Sources{
		Snapshot: snapshot(nil, []*corev1.Node{node, other}, boundPod("x", "ip-10-0-0-1", "1")),
		Config:   cfg, Catalog: cat, Claims: []*apis.NodeClaim{cl, gone, failed},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Nodes) != 2 {
		t.Fatalf("want the two Nodes only (deleting and failed claims offer nothing), got %d", len(c.Nodes))
	}
	n, ok := c.NodeForClaim("default-ccccc")
	if !ok || n.Name != "ip-10-0-0-1" || n.InFlight() || !n.Initialized() || len(n.Pods) != 1 {
		t.Fatalf("claim not joined to its Node: %+v", n)
	}
	if u, _ := c.Node("unmanaged"); u.Managed() || !u.Initialized() {
		t.Errorf("unmanaged ready node: managed=%v initialized=%v", u.Managed(), u.Initialized())
	}
}

// Consolidation's question: with these nodes gone, where do their pods go?
func TestWithoutMovesReschedulablePods(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	mk := func(name string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apis.NodePoolLabelKey: "default", catalog.LabelHostname: name}},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourcePods: resource.MustParse("58")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			}}
	}
	daemon := boundPod("agent-1", "n1", "100m")
	daemon.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}}
	c, err := state.Build(state.Sources{
		Snapshot: snapshot(nil, []*corev1.Node{mk("n1"), mk("n2")}, boundPod("p1", "n1", "1"), boundPod("p2", "n1", "1"), daemon, boundPod("p3", "n2", "1")),
		Config:   cfg, Catalog: cat,
	})
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Input(state.InputOptions{Without: []string{"n1"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Nodes) != 1 || in.Nodes[0].Name != "n2" || len(in.Pods) != 2 {
		t.Fatalf("nodes %d pods %d", len(in.Nodes), len(in.Pods))
	}
	for _, p := range in.Pods {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s still bound", p.Name)
		}
	}
	if c.Nodes[0].Pods[0].Spec.NodeName != "n1" {
		t.Error("Without modified the cluster's own pods")
	}
	plan, err := scheduling.Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.NodeClaims) != 0 || len(plan.ExistingNodes) != 1 || len(plan.ExistingNodes[0].Pods) != 2 {
		t.Fatalf("want n1's two pods to fit on n2, got %+v", plan)
	}
	if _, err := c.Input(state.InputOptions{Without: []string{"nope"}}); err == nil {
		t.Error("unknown node to simulate away: want an error")
	}
}

// One bad record must not stop every pass: a claim whose instance type left
// the catalog offers nothing but is still a node of its pool.
func TestClaimOutsideCatalogIsAWarning(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	cl := launchedClaim("default-zzzzz", "m99.huge", "us-west-2a", "i-9")
	c, err := state.Build(state.Sources{Snapshot: snapshot([]*corev1.Pod{pendingPod("a", "100m")}, nil), Config: cfg, Catalog: cat, Claims: []*apis.NodeClaim{cl}})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "m99.huge") {
		t.Fatalf("warnings %v", c.Warnings)
	}
	plan := solve(t, c, state.InputOptions{})
	if len(plan.NodeClaims) != 1 {
		t.Fatalf("the pod should get a new claim, got %+v", plan)
	}
}

// A Node that has come up but is not registered yet carries only what its
// kubelet set: not the claim's labels and taints, which registration adds
// moments later. Pods waiting for that claim must still count it as theirs
// (Karpenter reads an unregistered node's labels and taints from its
// NodeClaim), or every pass in that window buys a second node for them.
func TestUnregisteredNodeOffersItsClaimsLabels(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	cl := launchedClaim("default-fffff", "m5.large", "us-west-2a", "i-4")
	cl.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	node := unregisteredNode("ip-10-0-0-4", "i-4")
	selecting := pendingPod("sel", "500m")
	selecting.Spec.NodeSelector = map[string]string{apis.NodePoolLabelKey: "default"}
	selecting.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "web"}}
	intolerant := pendingPod("other", "500m")

	c, err := state.Build(state.Sources{Snapshot: snapshot([]*corev1.Pod{selecting, intolerant}, []*corev1.Node{node}),
		Config: cfg, Catalog: cat, Claims: []*apis.NodeClaim{cl}})
	if err != nil {
		t.Fatal(err)
	}
	en := c.Nodes[0].Existing()
	if en.Labels[apis.NodePoolLabelKey] != "default" || en.Labels[catalog.LabelHostname] != "ip-10-0-0-4" {
		t.Errorf("unregistered node's labels = %v, want the claim's with the Node's hostname", en.Labels)
	}
	plan := solve(t, c, state.InputOptions{})
	on := map[string]bool{}
	for _, e := range plan.ExistingNodes {
		for _, p := range e.Pods {
			on[p] = true
		}
	}
	if !on["ns/sel"] {
		t.Errorf("the pod selecting the claim's pool was not placed on its unregistered node: %d new claims", len(plan.NodeClaims))
	}
	if on["ns/other"] {
		t.Error("a pod that does not tolerate the claim's taint was placed on its unregistered node")
	}
}

// The claim (DynamoDB) can record the registration or the initialization
// before the Node the pass reads (the API server's watch cache) shows it:
// that Node is still offered as coming up (the claim's labels, its
// not-ready taint ignored), or the pods waiting for it would buy a second
// node (an interruption's redelivery did, under load).
func TestNodeBehindItsClaimIsOfferedAsComingUp(t *testing.T) {
	cfg, cat := loadConfig(t, nil), builtin(t)
	cases := map[string]struct {
		conds  []string
		labels map[string]string
		taint  corev1.Taint
	}{
		"registered, Node not labelled yet": {
			conds: []string{apis.ConditionRegistered},
			taint: corev1.Taint{Key: apis.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute},
		},
		"initialized, Node still not ready": {
			conds:  []string{apis.ConditionRegistered, apis.ConditionInitialized},
			labels: map[string]string{apis.NodeRegisteredLabel: "true", apis.NodePoolLabelKey: "default"},
			taint:  corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cl := launchedClaim("default-ggggg", "m5.large", "us-west-2a", "i-5")
			for _, c := range tc.conds {
				cl.SetCondition(c, metav1.ConditionTrue, c, "node ip-10-0-0-5", metav1.Now())
			}
			cl.Status.NodeName = "ip-10-0-0-5"
			node := unregisteredNode("ip-10-0-0-5", "i-5")
			maps.Copy(node.Labels, tc.labels)
			node.Spec.Taints = []corev1.Taint{tc.taint}
			selecting := pendingPod("sel", "500m")
			selecting.Spec.NodeSelector = map[string]string{apis.NodePoolLabelKey: "default"}
			c, err := state.Build(state.Sources{Snapshot: snapshot([]*corev1.Pod{selecting}, []*corev1.Node{node}),
				Config: cfg, Catalog: cat, Claims: []*apis.NodeClaim{cl}})
			if err != nil {
				t.Fatal(err)
			}
			if en := c.Nodes[0].Existing(); en.Labels[apis.NodePoolLabelKey] != "default" || en.Initialized {
				t.Errorf("labels = %v, initialized %v: want the claim's labels, not initialized", en.Labels, en.Initialized)
			}
			if plan := solve(t, c, state.InputOptions{}); len(plan.NodeClaims) != 0 {
				t.Errorf("the pod bought a second node (%d new claims) instead of waiting for its coming one", len(plan.NodeClaims))
			}
		})
	}
}

// unregisteredNode is an m5.large Node in us-west-2a as its kubelet
// creates it: the hostname label and the unregistered taint, none of its
// claim's labels or taints.
func unregisteredNode(name, instanceID string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{catalog.LabelHostname: name}},
		Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + instanceID, Taints: []corev1.Taint{
			{Key: apis.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute},
		}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"),
			corev1.ResourceMemory: resource.MustParse("7Gi"), corev1.ResourcePods: resource.MustParse("29")}},
	}
}

// staticConfig has a static pool "fixed" of the given replicas (limit: its
// limits.nodes, "" for none) beside the dynamic pool "default".
func staticConfig(t *testing.T, replicas int64, limit string) *apis.Config {
	t.Helper()
	reqs := []apistest.Req{
		apistest.In(catalog.LabelInstanceType, "m5.large", "m5.xlarge"),
		apistest.In(catalog.LabelCapacityType, "on-demand"),
	}
	fixed := apistest.Pool{Name: "fixed", Requirements: reqs, Replicas: &replicas}
	if limit != "" {
		fixed.Limits = map[string]string{"nodes": limit}
	}
	dynamic := apistest.Pool{Requirements: reqs}
	return apistest.Load(t, apistest.Doc(fixed.YAML(), dynamic.YAML(), apistest.NodeClass{}.YAML()))
}

// poolClaim is a claim of pool; registered ones get a Node (returned).
func poolClaim(name, pool string, launched, registered bool) (*apis.NodeClaim, *corev1.Node) {
	cl := launchedClaim(name, "m5.large", "us-west-2a", "i-"+name)
	cl.Labels[apis.NodePoolLabelKey] = pool
	if !launched {
		cl.Status = apis.NodeClaimStatus{}
		return cl, nil
	}
	if !registered {
		return cl, nil
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-" + name, Labels: map[string]string{apis.NodePoolLabelKey: pool}},
		Spec: corev1.NodeSpec{ProviderID: cl.Status.ProviderID}}
	return cl, n
}

type staticWorld struct {
	claims []*apis.NodeClaim
	nodes  []*corev1.Node
	pods   []*corev1.Pod
}

func (w *staticWorld) add(name, pool string, launched, registered bool) *apis.NodeClaim {
	cl, n := poolClaim(name, pool, launched, registered)
	w.claims = append(w.claims, cl)
	if n != nil {
		w.nodes = append(w.nodes, n)
	}
	return cl
}

func (w *staticWorld) build(t *testing.T, cfg *apis.Config) *state.Cluster {
	t.Helper()
	c, err := state.Build(state.Sources{Snapshot: snapshot(nil, w.nodes, w.pods...), Config: cfg, Catalog: builtin(t), Claims: w.claims})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func names(ns []*state.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Claim.Name)
	}
	return out
}

func TestStaticScaleLaunchesTheShortfall(t *testing.T) {
	now := time.Now()
	cfg := staticConfig(t, 3, "")
	w := &staticWorld{}
	w.add("fixed-a", "fixed", true, true)
	w.add("fixed-b", "fixed", false, false) // write-ahead record of a crashed run: counted
	w.add("default-a", "default", true, true)
	gone := w.add("fixed-c", "fixed", true, true)
	gone.MarkForDeletion(apis.DeletionReasonExpired, "expired", metav1.NewTime(now))
	s := w.build(t, cfg).StaticScale(cfg.NodePool("fixed"), now)
	if s.Launch != 1 || s.Limited || len(s.Remove) != 0 || s.Held != 3 {
		t.Fatalf("scale = launch %d limited %v remove %v held %d, want launch 1 (the expiring claim is replaced)", s.Launch, s.Limited, names(s.Remove), s.Held)
	}
	if got := names(s.Active); !slices.Equal(got, []string{"fixed-b", "fixed-a"}) && !slices.Equal(got, []string{"fixed-a", "fixed-b"}) {
		t.Errorf("active = %v", got)
	}
	if s := w.build(t, cfg).StaticScale(cfg.NodePool("default"), now); s.Launch != 0 || len(s.Remove) != 0 {
		t.Errorf("a dynamic pool has no replicas to keep: %+v", s)
	}
}

// limits.nodes counts every claim of the pool, the ones draining too.
func TestStaticScaleStopsAtTheNodeLimit(t *testing.T) {
	now := time.Now()
	cfg := staticConfig(t, 4, "3")
	w := &staticWorld{}
	w.add("fixed-a", "fixed", true, true)
	gone := w.add("fixed-b", "fixed", true, true)
	gone.MarkForDeletion(apis.DeletionReasonInterrupted, "spot", metav1.NewTime(now))
	s := w.build(t, cfg).StaticScale(cfg.NodePool("fixed"), now)
	if s.Launch != 1 || !s.Limited {
		t.Fatalf("launch %d limited %v, want 1 (3 - 2 held) and limited", s.Launch, s.Limited)
	}
	w.add("fixed-c", "fixed", true, false)
	if s := w.build(t, cfg).StaticScale(cfg.NodePool("fixed"), now); s.Launch != 0 || !s.Limited {
		t.Fatalf("launch %d limited %v, want 0 and limited", s.Launch, s.Limited)
	}
}

// Safety: a scale-down removes exactly the surplus, only claims of the
// pool itself, least disruptive first; never another pool's node or a node
// nodewright did not launch, even one labelled with the pool.
func TestStaticScaleRemovesOnlyTheSurplus(t *testing.T) {
	now := time.Now()
	w := &staticWorld{}
	w.add("fixed-busy", "fixed", true, true)
	w.add("fixed-empty", "fixed", true, true)
	w.add("fixed-booting", "fixed", true, false)
	w.add("fixed-unlaunched", "fixed", false, false)
	guarded := w.add("fixed-guarded", "fixed", true, true)
	guarded.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
	w.add("default-empty", "default", true, true)
	w.nodes = append(w.nodes, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Labels: map[string]string{apis.NodePoolLabelKey: "fixed"}}})
	w.pods = []*corev1.Pod{boundPod("web", "node-fixed-busy", "100m"), boundPod("api", "node-fixed-guarded", "100m")}
	order := []string{"fixed-unlaunched", "fixed-booting", "fixed-empty", "fixed-busy", "fixed-guarded"}
	for replicas := int64(0); replicas <= 6; replicas++ {
		cfg := staticConfig(t, replicas, "")
		s := w.build(t, cfg).StaticScale(cfg.NodePool("fixed"), now)
		want := max(5-int(replicas), 0)
		if got := names(s.Remove); !slices.Equal(got, order[:want]) {
			t.Errorf("replicas %d: remove %v, want %v", replicas, got, order[:want])
		}
		if wantLaunch := max(int(replicas)-5, 0); s.Launch != wantLaunch {
			t.Errorf("replicas %d: launch %d, want %d", replicas, s.Launch, wantLaunch)
		}
	}
}

// Pending pods never open a node in a static pool; the static pool's own
// template still plans one node for its replicas.
func TestStaticPoolsAreLeftOutOfThePodsInput(t *testing.T) {
	cfg := staticConfig(t, 2, "")
	pinned := pendingPod("pinned", "100m")
	pinned.Spec.NodeSelector = map[string]string{apis.NodePoolLabelKey: "fixed"}
	c, err := state.Build(state.Sources{Snapshot: snapshot([]*corev1.Pod{pendingPod("free", "100m"), pinned}, nil), Config: cfg, Catalog: builtin(t)})
	if err != nil {
		t.Fatal(err)
	}
	plan := solve(t, c, state.InputOptions{})
	if len(plan.NodeClaims) != 1 || plan.NodeClaims[0].NodePool != "default" || len(plan.Unschedulable) != 1 || plan.Unschedulable[0].Pod != "ns/pinned" {
		t.Fatalf("plan claims %+v unschedulable %+v: want one default claim and the pinned pod unschedulable", plan.NodeClaims, plan.Unschedulable)
	}
	in, err := c.StaticInput("fixed")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.NodePools) != 1 || in.NodePools[0].Name != "fixed" || len(in.Nodes) != 0 || len(in.Pods) != 1 {
		t.Fatalf("static input: pools %v nodes %d pods %d", in.NodePools, len(in.Nodes), len(in.Pods))
	}
	if _, err := c.StaticInput("default"); err == nil {
		t.Error("a dynamic pool has no static input")
	}
}

// The controller's settings reach every solve over the view: the planning
// policy through Input, the allocatable settings through the catalog (an
// in-flight claim's capacity is what new nodes are planned with).
func TestControllerSettingsReachTheInput(t *testing.T) {
	cfg := loadConfig(t, nil)
	zero := 0.0
	cat := builtin(t).WithControllerAllocatable(catalog.ControllerAllocatable{VMMemoryOverheadPercent: &zero})
	policy := scheduling.Policy{MinValuesBestEffort: true, IgnorePreferences: true}
	c, err := state.Build(state.Sources{Snapshot: snapshot(nil, nil), Config: cfg, Catalog: cat, Policy: policy,
		Claims: []*apis.NodeClaim{launchedClaim("default-aaaaa", "m5.large", "us-west-2a", "i-1")}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.Input(state.InputOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Policy != policy {
		t.Errorf("input policy %+v, want %+v", in.Policy, policy)
	}
	// m5.large: 7577Mi after 7.5 % overhead, 8192Mi without (then kube-reserved and eviction).
	if mem := c.Nodes[0].Existing().Allocatable.Memory(); mem.Value() < 7000<<20 {
		t.Errorf("in-flight allocatable memory %s: the catalog's zero VM overhead was not applied", mem)
	}
}
