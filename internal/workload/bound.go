package workload

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// attachBoundPods puts each bound pod on its node; pods on nodes the input
// does not list are reported, not dropped silently.
func (p *parser) attachBoundPods() {
	byName := map[string]*NodeWithPods{}
	for _, n := range p.w.Nodes {
		byName[n.Node.Name] = n
	}
	for _, b := range p.bound {
		n, ok := byName[b.pod.Spec.NodeName]
		if !ok {
			p.w.Warnings = append(p.w.Warnings, fmt.Sprintf("%s: Pod %s/%s is bound to node %q, which the input does not contain; ignored",
				b.where, b.pod.Namespace, b.pod.Name, b.pod.Spec.NodeName))
			continue
		}
		n.Pods = append(n.Pods, b.pod)
	}
}

// inferDaemonSets adds a DaemonSet for every DaemonSet owner seen on pods but
// not given as an object, using the first such pod's spec as the template,
// so new nodes in the plan reserve room for the daemons the cluster runs.
func (p *parser) inferDaemonSets() {
	have := map[string]bool{}
	for _, d := range p.w.DaemonSets {
		have[d.Namespace+"/"+d.Name] = true
	}
	for _, b := range p.daemonPods {
		owner := metav1.GetControllerOfNoCopy(b.pod)
		key := b.pod.Namespace + "/" + owner.Name
		if have[key] {
			continue
		}
		have[key] = true
		spec := b.pod.Spec.DeepCopy()
		spec.NodeName = ""
		stripDaemonNodeAffinity(spec)
		ds := &appsv1.DaemonSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
			ObjectMeta: metav1.ObjectMeta{Name: owner.Name, Namespace: b.pod.Namespace, UID: owner.UID},
			Spec: appsv1.DaemonSetSpec{
				Selector: &metav1.LabelSelector{MatchLabels: b.pod.Labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: b.pod.Labels, Annotations: b.pod.Annotations},
					Spec:       *spec,
				},
			},
		}
		p.w.DaemonSets = append(p.w.DaemonSets, ds)
		p.w.Warnings = append(p.w.Warnings, fmt.Sprintf("%s: DaemonSet %s inferred from its pod %s (no DaemonSet object given)", b.where, key, b.pod.Name))
	}
}

// stripDaemonNodeAffinity removes the metadata.name match the DaemonSet
// controller pins each daemon pod to its node with.
func stripDaemonNodeAffinity(spec *corev1.PodSpec) {
	a := spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return
	}
	req := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	terms := req.NodeSelectorTerms[:0]
	for _, t := range req.NodeSelectorTerms {
		fields := t.MatchFields[:0]
		for _, f := range t.MatchFields {
			if f.Key != "metadata.name" {
				fields = append(fields, f)
			}
		}
		t.MatchFields = fields
		if len(t.MatchExpressions) > 0 || len(t.MatchFields) > 0 {
			terms = append(terms, t)
		}
	}
	req.NodeSelectorTerms = terms
	if len(terms) == 0 {
		a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = nil
	}
	if a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil && len(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution) == 0 {
		a.NodeAffinity = nil
	}
	if a.NodeAffinity == nil && a.PodAffinity == nil && a.PodAntiAffinity == nil {
		spec.Affinity = nil
	}
}
