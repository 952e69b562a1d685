package scheduling

import (
	"fmt"

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

// requirements returns the node requirements the pod's volumes impose: a
// bound PV's node affinity (its first term, as Karpenter does), or for an
// unbound WaitForFirstConsumer claim its StorageClass's allowedTopologies
// (first term). Immediate-binding unbound claims impose nothing: the
// provisioner picks their topology independently of the node.
func (v *volumeIndex) requirements(pod *corev1.Pod) (Requirements, error) {
	var out Requirements
	for _, vol := range pod.Spec.Volumes {
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
			continue
		}
		pvc, ok := v.pvcs[pod.Namespace+"/"+claimName]
		var scName *string
		if ok {
			if pvc.Spec.VolumeName != "" {
				pv, ok := v.pvs[pvc.Spec.VolumeName]
				if !ok {
					return nil, fmt.Errorf("volume %q: persistent volume %q of claim %q not found", vol.Name, pvc.Spec.VolumeName, claimName)
				}
				if pv.Spec.NodeAffinity != nil && pv.Spec.NodeAffinity.Required != nil && len(pv.Spec.NodeAffinity.Required.NodeSelectorTerms) > 0 {
					rs, err := termRequirements(pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0])
					if err != nil {
						return nil, fmt.Errorf("volume %q: persistent volume %q node affinity: %w", vol.Name, pv.Name, err)
					}
					out = out.Intersect(rs)
				}
				continue
			}
			scName = pvc.Spec.StorageClassName
		} else if vol.Ephemeral != nil {
			scName = templateSC
		} else {
			return nil, fmt.Errorf("volume %q: persistent volume claim %q not found", vol.Name, claimName)
		}
		if scName == nil || *scName == "" {
			continue
		}
		sc, ok := v.scs[*scName]
		if !ok {
			return nil, fmt.Errorf("volume %q: storage class %q not found", vol.Name, *scName)
		}
		if sc.VolumeBindingMode == nil || *sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || len(sc.AllowedTopologies) == 0 {
			continue
		}
		for _, e := range sc.AllowedTopologies[0].MatchLabelExpressions {
			r, err := NewRequirement(e.Key, corev1.NodeSelectorOpIn, e.Values...)
			if err != nil {
				return nil, fmt.Errorf("storage class %q allowedTopologies: %w", sc.Name, err)
			}
			out = out.Add(r)
		}
	}
	return out, nil
}
