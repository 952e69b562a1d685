package scheduling

import (
	corev1 "k8s.io/api/core/v1"
)

// NodeDigest is what a solve reads of an existing node's allocatable and
// pods, computed once: a caller that solves many times over one cluster (a
// disruption pass's simulations, each against every node) digests each
// node once per pass instead of converting its allocatable and summing its
// pods' requests, host ports and affinity terms once per solve. It is
// read-only once made.
type NodeDigest struct {
	pool  string // the karpenter.sh/nodepool label
	alloc []resValue
	// used sums each resource's value over the pods; the pods resource is
	// count, whatever a pod requests of it.
	used  []resValue
	count int64
	ports []hostPort
	// anti are the pods with required pod anti-affinity terms (the only
	// terms of existing pods a solve honours).
	anti []*corev1.Pod
	// daemons are the DaemonSets with a pod here, by UID and by
	// namespace/name.
	daemons map[string]bool
	// claimPods are the pods that mount claims (for attach limits).
	claimPods []*corev1.Pod
}

// resValue is one resource's value in the solver's units (quantityValue).
type resValue struct {
	name corev1.ResourceName
	v    int64
}

// DigestNode digests en's Labels, Allocatable and Pods, reading the pods'
// requests from reqs (nil: computing them); en.Digest, when set, must be
// what it returns for those.
func DigestNode(en *ExistingNode, reqs *RequestCache) *NodeDigest {
	d := &NodeDigest{pool: en.Labels[LabelNodePool], count: int64(len(en.Pods))}
	for n, q := range en.Allocatable {
		d.alloc = append(d.alloc, resValue{n, quantityValue(n, q)})
	}
	used := map[corev1.ResourceName]int64{}
	for _, p := range en.Pods {
		for n, q := range reqs.Of(p) {
			if n != corev1.ResourcePods {
				used[n] += quantityValue(n, q)
			}
		}
		d.ports = append(d.ports, podHostPorts(p)...)
		if hasClaimVolume(p) {
			d.claimPods = append(d.claimPods, p)
		}
		if a := p.Spec.Affinity; a != nil && a.PodAntiAffinity != nil && len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			d.anti = append(d.anti, p)
		}
		for _, o := range p.OwnerReferences {
			if o.Kind == "DaemonSet" {
				if d.daemons == nil {
					d.daemons = map[string]bool{}
				}
				d.daemons[string(o.UID)] = true
				d.daemons[p.Namespace+"/"+o.Name] = true
			}
		}
	}
	for n, v := range used {
		d.used = append(d.used, resValue{n, v})
	}
	return d
}

// Room is how much of resource name (CPU in millicores, the pods resource
// in pods) the node has left for more pods: its allocatable less what its
// pods request. DaemonSet pods a node still starting has yet to run are
// not taken off, so it may be more than a solve gives.
func (d *NodeDigest) Room(name corev1.ResourceName) int64 {
	free := int64(0)
	for _, a := range d.alloc {
		if a.name == name {
			free = a.v
		}
	}
	if name == corev1.ResourcePods {
		return free - d.count
	}
	for _, u := range d.used {
		if u.name == name {
			free -= u.v
		}
	}
	return free
}

// digest is en's digest: the caller's, or made now.
func (en *ExistingNode) digest(reqs *RequestCache) *NodeDigest {
	if en.Digest != nil {
		return en.Digest
	}
	return DigestNode(en, reqs)
}

// values is vs in the solve's resource space (resources no pending pod or
// DaemonSet asks for are dropped, as resourceSpace.vector drops them).
func (s *resourceSpace) values(vs []resValue) resVec {
	v := make(resVec, s.dim())
	for _, x := range vs {
		if i, ok := s.index[x.name]; ok {
			v[i] = x.v
		}
	}
	return v
}
