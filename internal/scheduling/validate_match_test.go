package scheduling_test

import (
	"fmt"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// The independent checker's matchers (see validate_test.go): plain
// Kubernetes semantics for node affinity, taints, requests and pod
// affinity terms, with no solver code.

type vnode struct {
	name   string
	labels map[string]string
	taints []corev1.Taint
	alloc  corev1.ResourceList
	pods   []*corev1.Pod // every pod on the node (existing + placed + daemons)
	placed []*corev1.Pod
	ports  map[string]bool
	claim  bool
}

func matchExpr(e corev1.NodeSelectorRequirement, lbls map[string]string) bool {
	v, ok := nodeLabel(lbls, e.Key)
	switch e.Operator {
	case corev1.NodeSelectorOpIn:
		if !ok {
			return false
		}
		for _, x := range e.Values {
			if x == v {
				return true
			}
		}
		return false
	case corev1.NodeSelectorOpNotIn:
		for _, x := range e.Values {
			if ok && x == v {
				return false
			}
		}
		return true
	case corev1.NodeSelectorOpExists:
		return ok
	case corev1.NodeSelectorOpDoesNotExist:
		return !ok
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if !ok {
			return false
		}
		a, err1 := strconv.ParseInt(v, 10, 64)
		b, err2 := strconv.ParseInt(e.Values[0], 10, 64)
		if err1 != nil || err2 != nil {
			return false
		}
		if e.Operator == corev1.NodeSelectorOpGt {
			return a > b
		}
		return a < b
	}
	return false
}

func termMatches(t corev1.NodeSelectorTerm, lbls map[string]string, name string) bool {
	for _, e := range t.MatchExpressions {
		if !matchExpr(e, lbls) {
			return false
		}
	}
	for _, f := range t.MatchFields {
		if !matchExpr(corev1.NodeSelectorRequirement{Key: "n", Operator: f.Operator, Values: f.Values}, map[string]string{"n": name}) {
			return false
		}
	}
	return true
}

// nodeLabel reads a node's label as a real node carries it: beside the
// stable keys the plan names, k8s.io/cloud-provider's node controller sets
// the deprecated beta.kubernetes.io/instance-type and
// failure-domain.beta.kubernetes.io/zone and -region, and the kubelet the
// beta arch and os.
func nodeLabel(lbls map[string]string, key string) (string, bool) {
	if v, ok := lbls[key]; ok {
		return v, true
	}
	v, ok := lbls[scheduling.NormalizedKey(key)]
	return v, ok
}

func nodeAffinityOK(p *corev1.Pod, n *vnode) error {
	for k, v := range p.Spec.NodeSelector {
		if got, _ := nodeLabel(n.labels, k); got != v {
			return fmt.Errorf("nodeSelector %s=%s not met (node has %q)", k, v, got)
		}
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			if termMatches(t, n.labels, n.name) {
				return nil
			}
		}
		return fmt.Errorf("no required node affinity term matches")
	}
	return nil
}

func tolerated(p *corev1.Pod, t corev1.Taint) bool {
	for _, tol := range p.Spec.Tolerations {
		if tol.Effect != "" && tol.Effect != t.Effect {
			continue
		}
		if tol.Operator == corev1.TolerationOpExists && (tol.Key == "" || tol.Key == t.Key) {
			return true
		}
		if tol.Key == t.Key && tol.Value == t.Value {
			return true
		}
	}
	return false
}

func podReq(p *corev1.Pod) corev1.ResourceList {
	out := scheduling.PodRequests(p)
	out[corev1.ResourcePods] = resource.MustParse("1")
	return out
}

func selects(term *corev1.PodAffinityTerm, owner, q *corev1.Pod) bool {
	nsOK := false
	if len(term.Namespaces) == 0 && term.NamespaceSelector == nil {
		nsOK = q.Namespace == owner.Namespace
	} else {
		for _, n := range term.Namespaces {
			if n == q.Namespace {
				nsOK = true
			}
		}
		if term.NamespaceSelector != nil && len(term.NamespaceSelector.MatchLabels) == 0 && len(term.NamespaceSelector.MatchExpressions) == 0 {
			nsOK = true
		}
	}
	if !nsOK || term.LabelSelector == nil {
		return false
	}
	selMu.Lock()
	sel, ok := selCache[term.LabelSelector]
	if !ok {
		var err error
		sel, err = metav1.LabelSelectorAsSelector(term.LabelSelector)
		if err != nil {
			sel = labels.Nothing()
		}
		selCache[term.LabelSelector] = sel
	}
	selMu.Unlock()
	return sel.Matches(labels.Set(q.Labels))
}

var (
	selMu    sync.Mutex
	selCache = map[*metav1.LabelSelector]labels.Selector{}
)
