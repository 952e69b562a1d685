package scheduling_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// Karpenter's scheduling test suites (sigs.k8s.io/karpenter v1.14.1,
// pkg/controllers/provisioning/scheduling/*_test.go and
// pkg/controllers/provisioning/suite_test.go) as the planner's spec. Every
// specCase is one behaviour Karpenter asserts, named after its
// Describe/Context/It path (shortened) with the file and line it comes
// from, written for nodewright's solver on the embedded catalog. A case
// listed in knownHoles must still fail (the runner inverts it), so a fix
// shows up as a failing test that asks for the entry to be deleted; a case
// in deliberateDifferences asserts nodewright's own behaviour.

// Karpenter's fake cloud provider has three zones; the spec keeps the
// embedded catalog's offerings in three us-east-1 zones so that "every
// zone" means the same thing in both suites.
const (
	zone1 = "us-east-1a"
	zone2 = "us-east-1b"
	zone3 = "us-east-1c"
)

var specZones = []string{zone1, zone2, zone3}

var (
	specTypesOnce sync.Once
	specTypesVal  []*scheduling.InstanceType
	specTypesErr  error
)

// specCatalogTypes is the embedded us-east-1 catalog as the default node
// class sees it, offerings limited to the three spec zones. Read-only:
// cases that change a type copy it first (specTypes).
func specCatalogTypes() ([]*scheduling.InstanceType, error) {
	specTypesOnce.Do(func() {
		cat, err := catalog.Builtin("us-east-1")
		if err != nil {
			specTypesErr = fmt.Errorf("embedded catalog: %w", err)
			return
		}
		its, err := scheduling.InstanceTypesFromCatalog(cat, nil, nil)
		if err != nil {
			specTypesErr = fmt.Errorf("instance types: %w", err)
			return
		}
		for _, it := range its {
			var offs []scheduling.Offering
			for _, o := range it.Offerings {
				if o.Zone == zone1 || o.Zone == zone2 || o.Zone == zone3 {
					offs = append(offs, o)
				}
			}
			cp := *it
			cp.Offerings = offs
			specTypesVal = append(specTypesVal, &cp)
		}
	})
	return specTypesVal, specTypesErr
}

// specTypes returns a deep-enough copy of the catalog types (labels,
// resources and offerings copied) that a case may edit.
func specTypes(t *testing.T) []*scheduling.InstanceType {
	t.Helper()
	its, err := specCatalogTypes()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*scheduling.InstanceType, len(its))
	for i, it := range its {
		cp := *it
		cp.Labels = map[string]string{}
		for k, v := range it.Labels {
			cp.Labels[k] = v
		}
		cp.Capacity, cp.Allocatable = it.Capacity.DeepCopy(), it.Allocatable.DeepCopy()
		cp.Offerings = append([]scheduling.Offering(nil), it.Offerings...)
		out[i] = &cp
	}
	return out
}

// specCase is one ported behaviour.
type specCase struct {
	name string // Karpenter's Describe/Context/It path, shortened
	src  string // Karpenter file:line under pkg/controllers/provisioning
	// pods are the pending pods; pools the NodePools (nil: specPool()).
	pods  []*corev1.Pod
	pools []*scheduling.NodePool
	// edit changes the input further (nodes, daemonsets, types, volumes).
	edit  func(t *testing.T, in *scheduling.Input)
	check func(r *specRun) error
	// noPlanCheck, when set, says why the plan checker (planErrors) does
	// not apply to the case.
	noPlanCheck string
}

// specRun is one solve of a case, with the questions Karpenter's
// Expect... helpers ask of the result.
type specRun struct {
	in   *scheduling.Input
	plan *scheduling.Plan
}

func (c *specCase) input(t *testing.T) *scheduling.Input {
	pools := c.pools
	if pools == nil {
		pools = []*scheduling.NodePool{specPool("default")}
	}
	in := &scheduling.Input{Pods: c.pods, NodePools: pools, DefaultInstanceTypes: specTypes(t)}
	if c.edit != nil {
		c.edit(t, in)
	}
	return in
}

// run solves the case and returns what differs from the behaviour.
func (c *specCase) run(t *testing.T) error {
	in := c.input(t)
	plan, err := scheduling.Solve(context.Background(), in)
	if err != nil {
		return fmt.Errorf("solve: %w", err)
	}
	var errs []error
	for _, e := range planErrors(in, plan) {
		if c.noPlanCheck != "" {
			break
		}
		errs = append(errs, fmt.Errorf("invalid plan: %s", e))
	}
	if err := c.check(&specRun{in: in, plan: plan}); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		errs = append(errs, fmt.Errorf("plan %q", summary(plan)))
	}
	return errors.Join(errs...)
}

// runSpec runs a table. A known hole passes while its behaviour still
// differs from Karpenter's and fails once it holds, so the fix removes
// the entry.
func runSpec(t *testing.T, cases []specCase) {
	t.Helper()
	for i := range cases {
		c := &cases[i]
		t.Run(c.name, func(t *testing.T) {
			err := c.run(t)
			hole, listed := knownHoles[c.name]
			switch {
			case listed && err == nil:
				t.Errorf("known hole %q is fixed (Karpenter %s): delete its knownHoles entry", hole, c.src)
			case listed:
				t.Logf("known hole (%s): %v", hole, err)
			case err != nil:
				t.Errorf("Karpenter %s: %v", c.src, err)
			}
		})
	}
}

// specPool is Karpenter's test NodePool: any capacity type.
func specPool(name string, reqs ...scheduling.Requirement) *scheduling.NodePool {
	p := &scheduling.NodePool{Name: name, NodeClass: "default"}
	p.Requirements = p.Requirements.Add(req(scheduling.LabelCapacityType, in, "spot", "on-demand"))
	for _, r := range reqs {
		p.Requirements = p.Requirements.Add(r)
	}
	return p
}

// specPoolOnly is a pool whose requirements are exactly reqs, as when a
// Karpenter test replaces the template's requirements.
func specPoolOnly(name string, reqs ...scheduling.Requirement) *scheduling.NodePool {
	return &scheduling.NodePool{Name: name, NodeClass: "default", Requirements: scheduling.NewRequirements(reqs...)}
}

func withLabels(p *scheduling.NodePool, kv ...string) *scheduling.NodePool {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

// podOpt edits a spec pod.
type podOpt func(*corev1.Pod)

// kpod is Karpenter's test.UnschedulablePod: no requests unless given.
func kpod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(epoch)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

// kpods makes n pods name-0 ... name-(n-1) with the same options.
func kpods(n int, name string, opts ...podOpt) []*corev1.Pod {
	out := make([]*corev1.Pod, n)
	for i := range out {
		out[i] = kpod(fmt.Sprintf("%s-%d", name, i), opts...)
		out[i].CreationTimestamp = metav1.NewTime(epoch.Add(time.Duration(i) * time.Millisecond))
	}
	return out
}

func requests(kv ...string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests = rl(kv...) }
}

func limits(kv ...string) podOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Limits = rl(kv...) }
}

func selector(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Spec.NodeSelector == nil {
			p.Spec.NodeSelector = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func podLabels(kv ...string) podOpt {
	return func(p *corev1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func expr(key string, op corev1.NodeSelectorOperator, vals ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: vals}
}

func nodeAffinity(p *corev1.Pod) *corev1.NodeAffinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	if p.Spec.Affinity.NodeAffinity == nil {
		p.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	return p.Spec.Affinity.NodeAffinity
}

// required adds one required node selector term (test.PodOptions'
// NodeRequirements); several calls add OR terms.
func required(exprs ...corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		na := nodeAffinity(p)
		if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		}
		sel := na.RequiredDuringSchedulingIgnoredDuringExecution
		sel.NodeSelectorTerms = append(sel.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: exprs})
	}
}

// preferred adds one preferred term of the weight.
func preferred(weight int32, exprs ...corev1.NodeSelectorRequirement) podOpt {
	return func(p *corev1.Pod) {
		na := nodeAffinity(p)
		na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: exprs}})
	}
}

func tolerates(tols ...corev1.Toleration) podOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tols...) }
}

func spreads(cs ...corev1.TopologySpreadConstraint) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, cs...)
	}
}

func hostPort(port int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

// daemonSet wraps a pod's spec as a DaemonSet template.
func daemonSet(name string, p *corev1.Pod) *appsv1.DaemonSet {
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system"},
		Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: p.Labels}, Spec: p.Spec}}}
}

// --- questions about the plan ---

// node is where a pod landed: a claim's labels or an existing node's.
type placedNode struct {
	name   string
	labels map[string]string
	claim  *scheduling.NodeClaimPlan
}

func (r *specRun) nodeOf(pod string) (*placedNode, bool) {
	key := "default/" + pod
	for i, c := range r.plan.NodeClaims {
		for _, p := range c.Pods {
			if p == key {
				return &placedNode{name: fmt.Sprintf("claim-%d", i), labels: c.Labels, claim: c}, true
			}
		}
	}
	for _, n := range r.plan.ExistingNodes {
		for _, p := range n.Pods {
			if p == key {
				return &placedNode{name: n.Name, labels: r.existingLabels(n.Name)}, true
			}
		}
	}
	return nil, false
}

func (r *specRun) existingLabels(name string) map[string]string {
	for _, n := range r.in.Nodes {
		if n.Name == name {
			return n.Labels
		}
	}
	return nil
}

// scheduled is Karpenter's ExpectScheduled for each pod.
func (r *specRun) scheduled(pods ...string) error {
	var errs []error
	for _, p := range pods {
		if _, ok := r.nodeOf(p); !ok {
			errs = append(errs, fmt.Errorf("pod %s not scheduled: %s", p, reasonOf(r.plan, p)))
		}
	}
	return errors.Join(errs...)
}

// notScheduled is Karpenter's ExpectNotScheduled for each pod.
func (r *specRun) notScheduled(pods ...string) error {
	var errs []error
	for _, p := range pods {
		if n, ok := r.nodeOf(p); ok {
			errs = append(errs, fmt.Errorf("pod %s scheduled on %s, want unschedulable", p, n.name))
		}
	}
	return errors.Join(errs...)
}

// label is the value of key on the pod's node.
func (r *specRun) label(pod, key string) (string, bool, error) {
	n, ok := r.nodeOf(pod)
	if !ok {
		return "", false, fmt.Errorf("pod %s not scheduled: %s", pod, reasonOf(r.plan, pod))
	}
	v, has := n.labels[key]
	return v, has, nil
}

// hasLabel: the pod's node carries key=value.
func (r *specRun) hasLabel(pod, key, value string) error {
	v, has, err := r.label(pod, key)
	if err != nil {
		return err
	}
	if !has || v != value {
		return fmt.Errorf("pod %s: node label %s=%q (present %v), want %q", pod, key, v, has, value)
	}
	return nil
}

// lacksLabel: the pod's node has no key, or not with value ("" any value).
func (r *specRun) lacksLabel(pod, key, value string) error {
	v, has, err := r.label(pod, key)
	if err != nil {
		return err
	}
	if has && (value == "" || v == value) {
		return fmt.Errorf("pod %s: node has label %s=%q", pod, key, v)
	}
	return nil
}

// sameNode: every pod is scheduled and on one node.
func (r *specRun) sameNode(pods ...string) error {
	names := r.nodeNames(pods)
	if len(names) != 1 || r.scheduled(pods...) != nil {
		return errors.Join(r.scheduled(pods...), fmt.Errorf("pods %v on nodes %v, want one node", pods, names))
	}
	return nil
}

// distinctNodes: every pod is scheduled, each on its own node.
func (r *specRun) distinctNodes(pods ...string) error {
	if err := r.scheduled(pods...); err != nil {
		return err
	}
	if names := r.nodeNames(pods); len(names) != len(pods) {
		return fmt.Errorf("pods %v on nodes %v, want one node each", pods, names)
	}
	return nil
}

func (r *specRun) nodeNames(pods []string) []string {
	set := map[string]bool{}
	for _, p := range pods {
		if n, ok := r.nodeOf(p); ok {
			set[n.name] = true
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// claims: the plan launches exactly n new nodes.
func (r *specRun) claims(n int) error {
	if len(r.plan.NodeClaims) != n {
		return fmt.Errorf("%d new nodes, want %d", len(r.plan.NodeClaims), n)
	}
	return nil
}

// countBy counts the scheduled pods per value of key on their nodes
// (pods without the label under "").
func (r *specRun) countBy(key string, pods []*corev1.Pod) map[string]int {
	out := map[string]int{}
	for _, p := range pods {
		if n, ok := r.nodeOf(p.Name); ok {
			out[n.labels[key]]++
		}
	}
	return out
}

func shortLabel(key string) string {
	if i := strings.LastIndex(key, "/"); i >= 0 {
		return key[i+1:]
	}
	return key
}

func names(ps []*corev1.Pod) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

func qtyOf(s string) resource.Quantity { return resource.MustParse(s) }
