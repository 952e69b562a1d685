package kube

// VolumeLimits is, per node name, how many volumes each CSI driver on it may
// attach: the CSINodes' spec.drivers[].allocatable.count, as Karpenter's
// cluster state reads them (v1.14.1 controllers/state/cluster.go
// populateVolumeLimits) and the kube-scheduler's NodeVolumeLimits plugin
// enforces them. A driver without allocatable or without a count has no
// limit: Kubernetes defines a nil count as unbounded and the scheduler
// (nodevolumelimits/csi.go getVolumeLimits) skips it, where Karpenter would
// read a nil count as 0. Nodes without a CSINode (not yet registered by
// their CSI node plugins) are absent.
func (s *Snapshot) VolumeLimits() map[string]map[string]int {
	out := make(map[string]map[string]int, len(s.CSINodes))
	for _, cn := range s.CSINodes {
		if cn == nil {
			continue
		}
		for _, d := range cn.Spec.Drivers {
			if d.Allocatable == nil || d.Allocatable.Count == nil {
				continue
			}
			if out[cn.Name] == nil {
				out[cn.Name] = map[string]int{}
			}
			out[cn.Name][d.Name] = int(*d.Allocatable.Count)
		}
	}
	return out
}
