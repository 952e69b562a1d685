package disruption

import (
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/state"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

type fixture struct {
	t      testing.TB
	cfg    *apis.Config
	cat    *catalog.Catalog
	nodes  []*corev1.Node
	claims []*apis.NodeClaim
	pods   []*corev1.Pod
	pend   []*corev1.Pod
	pdbs   []*policyv1.PodDisruptionBudget
	now    time.Time
	drift  map[string]string
	hist   []HistoryEntry
	set    Settings
}

type fixOpt struct {
	types   []string // instance types; nil: m5.large, m5.xlarge, m5.2xlarge
	ct      string   // the one capacity type; "": on-demand
	policy  string   // consolidation policy; "": WhenEmptyOrUnderutilized
	budgets []apistest.Budget
}

// newFixture loads the package's pool, "default" in us-west-2a with
// consolidateAfter 30s (its requirements: instance types, capacity type,
// zone, in that order), and the builtin catalog.
func newFixture(t testing.TB, o fixOpt) *fixture {
	t.Helper()
	if o.types == nil {
		o.types = []string{"m5.large", "m5.xlarge", "m5.2xlarge"}
	}
	if o.ct == "" {
		o.ct = "on-demand"
	}
	if o.policy == "" {
		o.policy = "WhenEmptyOrUnderutilized"
	}
	pool := apistest.Pool{
		Requirements: []apistest.Req{
			apistest.In(catalog.LabelInstanceType, o.types...),
			apistest.In(catalog.LabelCapacityType, o.ct),
			apistest.In(catalog.LabelTopologyZone, "us-west-2a"),
		},
		ConsolidationPolicy: o.policy,
		ConsolidateAfter:    "30s",
		Budgets:             o.budgets,
	}
	cfg := apistest.Load(t, apistest.Doc(pool.YAML(), apistest.NodeClass{}.YAML()))
	cat, err := catalog.Builtin("us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, cfg: cfg, cat: cat, now: t0, drift: map[string]string{}, set: Settings{ValidationDelay: -1}}
}

// decide runs Decide on the fixture's view, failing the test on an error.
func (f *fixture) decide() *Decision {
	f.t.Helper()
	d, err := Decide(ctx, f.view())
	if err != nil {
		f.t.Fatal(err)
	}
	return d
}

// node adds an initialized, Ready node of typ with its claim, created an
// hour ago with no pod event since.
func (f *fixture) node(name, typ string) (*corev1.Node, *apis.NodeClaim) {
	f.t.Helper()
	return f.nodeIn(name, typ, "default")
}

// nodeIn is node in pool (whose second requirement is its capacity type).
func (f *fixture) nodeIn(name, typ, pool string) (*corev1.Node, *apis.NodeClaim) {
	f.t.Helper()
	np := f.cfg.NodePool(pool)
	ct := np.Spec.Template.Spec.Requirements[1].Values[0]
	it, ok := f.cat.Get(typ)
	if !ok {
		f.t.Fatalf("type %s not in catalog", typ)
	}
	off, ok := it.Offering("us-west-2a", ct)
	if !ok {
		f.t.Fatalf("%s has no %s offering in us-west-2a", typ, ct)
	}
	nc := f.cfg.NodeClass("default")
	opts := catalog.OptionsForNodeClass(nc)
	alloc, err := it.Allocatable(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	labels := it.NodeLabels(off)
	maps.Copy(labels, np.Spec.Template.ObjectMeta.Labels)
	labels[apis.NodePoolLabelKey] = pool
	labels[apis.NodeClassLabelKey] = "default"
	labels[apis.NodeRegisteredLabel], labels[apis.NodeInitializedLabel] = "true", "true"
	labels[catalog.LabelHostname] = name
	id := "i-" + name
	created := metav1.NewTime(f.now.Add(-time.Hour))
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, CreationTimestamp: created},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + id},
		Status: corev1.NodeStatus{Allocatable: alloc, Capacity: it.Capacity(opts),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	cl := &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "claim-" + name, CreationTimestamp: created, Labels: map[string]string{
			apis.NodePoolLabelKey: pool, catalog.LabelInstanceType: typ, catalog.LabelTopologyZone: "us-west-2a",
			apis.CapacityTypeLabelKey: ct, apis.NodeClassLabelKey: "default",
		}},
		Spec: apis.NodeClaimSpec{
			NodeClassRef: np.Spec.Template.Spec.NodeClassRef, ExpireAfter: np.Spec.Template.Spec.ExpireAfter,
			Requirements: []apis.NodeSelectorRequirementWithMinValues{{Key: catalog.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{typ}}},
		},
		NodePoolHash: np.Hash(), NodeClassHash: nc.Hash(),
	}
	cl.Status.InstanceID, cl.Status.ProviderID, cl.Status.NodeName = id, n.Spec.ProviderID, name
	cl.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched", "", created)
	cl.SetCondition(apis.ConditionRegistered, metav1.ConditionTrue, "Registered", "", created)
	cl.SetCondition(apis.ConditionInitialized, metav1.ConditionTrue, "Initialized", "", created)
	f.nodes = append(f.nodes, n)
	f.claims = append(f.claims, cl)
	return n, cl
}

func (f *fixture) pod(name, node, cpu, mem string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Labels: map[string]string{"app": name},
			CreationTimestamp: metav1.NewTime(f.now.Add(-time.Hour))},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning},
	}
	if node == "" {
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}}}
		f.pend = append(f.pend, p)
		return p
	}
	f.pods = append(f.pods, p)
	return p
}

func (f *fixture) daemonPod(name, node string) *corev1.Pod {
	p := f.pod(name, node, "100m", "64Mi")
	p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "ds", APIVersion: "apps/v1"}}
	return p
}

func (f *fixture) pdb(name, app string, allowed int32) {
	zero := intstr.FromInt32(0)
	f.pdbs = append(f.pdbs, &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	})
}

func (f *fixture) view() *View {
	f.t.Helper()
	snap := &kube.Snapshot{PendingPods: f.pend, Nodes: f.nodes, PodsByNode: map[string][]*corev1.Pod{}, PDBs: f.pdbs, TakenAt: f.now}
	for _, p := range f.pods {
		snap.PodsByNode[p.Spec.NodeName] = append(snap.PodsByNode[p.Spec.NodeName], p)
	}
	c, err := state.Build(state.Sources{Snapshot: snap, Claims: f.claims, Config: f.cfg, Catalog: f.cat})
	if err != nil {
		f.t.Fatal(err)
	}
	return &View{Cluster: c, PDBs: f.pdbs, Now: f.now, CloudDrift: f.drift, Settings: f.set, History: f.hist}
}

func names(cands []*Candidate) []string {
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.Name()
	}
	return out
}

func fmtCmd(c *Command) string {
	if c == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%s/%s %v: %s", c.Method, c.Action(), c.NodeNames(), c.Message)
}
