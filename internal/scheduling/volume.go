package scheduling

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// volumeIndex resolves the node topology a pod's volumes impose.
type volumeIndex struct {
	pvs  map[string]*corev1.PersistentVolume
	pvcs map[string]*corev1.PersistentVolumeClaim
	scs  map[string]*storagev1.StorageClass
}

func newVolumeIndex(in *Input) *volumeIndex {
	v := &volumeIndex{
		pvs:  make(map[string]*corev1.PersistentVolume, len(in.PersistentVolumes)),
		pvcs: make(map[string]*corev1.PersistentVolumeClaim, len(in.PersistentVolumeClaims)),
		scs:  make(map[string]*storagev1.StorageClass, len(in.StorageClasses)),
	}
	for _, pv := range in.PersistentVolumes {
		v.pvs[pv.Name] = pv
	}
	for _, c := range in.PersistentVolumeClaims {
		v.pvcs[c.Namespace+"/"+c.Name] = c
	}
	for _, sc := range in.StorageClasses {
		v.scs[sc.Name] = sc
	}
	return v
}

// volumeAlternatives are the node requirements a pod's volumes impose, as
// alternatives (any one will do); nil when they impose nothing. Karpenter
// v1.14.1 (provisioning/scheduling volumetopology.go GetRequirements): each
// term of a bound PV's node affinity, or of an unbound claim's
// StorageClass allowedTopologies, is one alternative, and several volumes
// give the cross product of their alternatives (incompatible pairs pruned
// while some pair is compatible).
type volumeAlternatives []Requirements

// key is the alternatives in a canonical form, for the shape key.
func (va volumeAlternatives) key() string {
	parts := make([]string, len(va))
	for i, a := range va {
		parts[i] = a.canonical()
	}
	return strings.Join(parts, "|")
}

// requirements returns the pod's volume alternatives, or an error when a
// volume keeps the pod from scheduling at all (as Karpenter's
// ValidatePersistentVolumeClaims refuses it, which the kube-scheduler's
// volume binding does too).
func (v *volumeIndex) requirements(pod *corev1.Pod) (volumeAlternatives, error) {
	var out volumeAlternatives
	for _, vol := range pod.Spec.Volumes {
		alts, err := v.volumeRequirements(pod, vol)
		if err != nil {
			return nil, fmt.Errorf("volume %q: %w", vol.Name, err)
		}
		out = crossAlternatives(out, alts)
	}
	return out, nil
}

// crossAlternatives merges one volume's alternatives into the pod's so far.
func crossAlternatives(acc, alts volumeAlternatives) volumeAlternatives {
	if len(alts) == 0 {
		return acc
	}
	if len(acc) == 0 {
		return alts
	}
	var compatible, all volumeAlternatives
	for _, a := range acc {
		for _, b := range alts {
			merged := a.Intersect(b)
			all = append(all, merged)
			if ok, _ := merged.Satisfiable(); ok {
				compatible = append(compatible, merged)
			}
		}
	}
	if len(compatible) > 0 {
		return compatible
	}
	return all // unsatisfiable: the pod is reported unschedulable
}

// volumeRequirements is one volume's alternatives.
func (v *volumeIndex) volumeRequirements(pod *corev1.Pod, vol corev1.Volume) (volumeAlternatives, error) {
	var claimName string
	var templateSC *string
	switch {
	case vol.PersistentVolumeClaim != nil:
		claimName = vol.PersistentVolumeClaim.ClaimName
	case vol.Ephemeral != nil:
		claimName = pod.Name + "-" + vol.Name
		if vol.Ephemeral.VolumeClaimTemplate != nil {
			templateSC = vol.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName
		}
	default:
		return nil, nil
	}
	pvc, ok := v.pvcs[pod.Namespace+"/"+claimName]
	if !ok {
		if vol.Ephemeral == nil {
			return nil, fmt.Errorf("persistent volume claim %q not found", claimName)
		}
		// The ephemeral claim is created with the pod: its template's class.
		return v.classRequirements(templateSC)
	}
	if err := claimUsable(pvc); err != nil {
		return nil, fmt.Errorf("persistent volume claim %q %w", claimName, err)
	}
	if pvc.Spec.VolumeName != "" {
		pv, ok := v.pvs[pvc.Spec.VolumeName]
		if !ok {
			return nil, fmt.Errorf("persistent volume %q of claim %q not found", pvc.Spec.VolumeName, claimName)
		}
		if pv.DeletionTimestamp != nil {
			return nil, fmt.Errorf("persistent volume %q of claim %q is being deleted", pv.Name, claimName)
		}
		return pvRequirements(pv)
	}
	// Unbound: Karpenter needs a class to provision through.
	if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName == "" {
		return nil, fmt.Errorf("unbound persistent volume claim %q names no storage class (it waits for a volume to be bound)", claimName)
	}
	return v.classRequirements(pvc.Spec.StorageClassName)
}

// claimUsable refuses what the kube-scheduler's volume binding and
// Karpenter's ValidatePersistentVolumeClaims refuse.
func claimUsable(pvc *corev1.PersistentVolumeClaim) error {
	switch {
	case pvc.DeletionTimestamp != nil:
		return fmt.Errorf("is being deleted")
	case pvc.Status.Phase == corev1.ClaimLost:
		return fmt.Errorf("is bound to a persistent volume that no longer exists")
	}
	return nil
}

// pvRequirements: each node affinity term of a bound PV is an alternative.
// A local or hostPath volume's hostname terms are dropped, as Karpenter does
// (the pod rescheduled to a new node cannot keep the old hostname); a term
// that was only a hostname leaves an unconstrained alternative.
func pvRequirements(pv *corev1.PersistentVolume) (volumeAlternatives, error) {
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return nil, nil
	}
	local := pv.Spec.Local != nil || pv.Spec.HostPath != nil
	var out volumeAlternatives
	for _, term := range pv.Spec.NodeAffinity.Required.NodeSelectorTerms {
		exprs := term.MatchExpressions
		if local {
			exprs = withoutHostname(exprs)
			if len(term.MatchExpressions) > 0 && len(exprs) == 0 {
				out = append(out, Requirements{})
				continue
			}
		}
		if len(exprs) == 0 {
			continue
		}
		rs, err := termRequirements(corev1.NodeSelectorTerm{MatchExpressions: exprs})
		if err != nil {
			return nil, fmt.Errorf("persistent volume %q node affinity: %w", pv.Name, err)
		}
		out = append(out, rs)
	}
	return out, nil
}

func withoutHostname(exprs []corev1.NodeSelectorRequirement) []corev1.NodeSelectorRequirement {
	var out []corev1.NodeSelectorRequirement
	for _, e := range exprs {
		if e.Key != corev1.LabelHostname {
			out = append(out, e)
		}
	}
	return out
}

// classRequirements: an unbound claim's class. Immediate binding means the
// volume is provisioned without regard to the node, so the pod waits for it
// to bind (Karpenter and the kube-scheduler refuse the pod until then);
// otherwise each allowedTopologies term is an alternative.
func (v *volumeIndex) classRequirements(name *string) (volumeAlternatives, error) {
	if name == nil || *name == "" {
		return nil, nil
	}
	sc, ok := v.scs[*name]
	if !ok {
		return nil, fmt.Errorf("storage class %q not found", *name)
	}
	// An unset mode (the API server defaults it to Immediate) is taken as
	// Karpenter takes it: not refused.
	if sc.VolumeBindingMode != nil && *sc.VolumeBindingMode == storagev1.VolumeBindingImmediate {
		return nil, fmt.Errorf("storage class %q binds Immediate: the claim must be bound before the pod can schedule", sc.Name)
	}
	var out volumeAlternatives
	for _, term := range sc.AllowedTopologies {
		var rs Requirements
		for _, e := range term.MatchLabelExpressions {
			r, err := NewRequirement(e.Key, corev1.NodeSelectorOpIn, e.Values...)
			if err != nil {
				return nil, fmt.Errorf("storage class %q allowedTopologies: %w", sc.Name, err)
			}
			rs = rs.Add(r)
		}
		if len(rs) > 0 {
			out = append(out, rs)
		}
	}
	return out, nil
}

// withVolumes joins the pod's node requirements (base AND any of terms)
// with its volumes' alternatives: one alternative narrows base; several
// become OR terms, crossed with the pod's own. Like Karpenter, the volumes'
// requirements constrain the node, not the pod's node affinity that
// topology spread filters with (groups are built from base and terms).
func withVolumes(base Requirements, terms []Requirements, vols volumeAlternatives) (Requirements, []Requirements) {
	switch {
	case len(vols) == 0:
		return base, terms
	case len(vols) == 1:
		return base.Intersect(vols[0]), terms
	case len(terms) == 0:
		return base, vols
	}
	return base, crossAlternatives(terms, vols)
}
