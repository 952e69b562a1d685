package scheduling

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
)

// CSI volume attach limits, as Karpenter v1.14.1 models them
// (pkg/scheduling/volumeusage.go, used by
// controllers/provisioning/scheduling/existingnode.go CanAdd): an existing
// node's CSINode gives a limit per CSI driver (ExistingNode.VolumeLimits),
// every pod's persistent volume claims (ephemeral ones included) count
// against their driver, the same claim counts once per node however many
// pods mount it, and a pod whose claims would take a driver over its limit
// does not go there. New nodes have no limit: Karpenter's NodeClaim does
// not check volumes and the AWS provider models no per-type EBS limit, so
// a pod that fits nowhere else gets a new node.

// attachment is one volume a pod attaches: its CSI driver and its claim
// (namespace/name, the key Karpenter's VolumeUsage counts).
type attachment struct {
	driver string
	claim  string
}

// inTreeDrivers maps in-tree provisioner names to their CSI drivers, for
// storage classes that still name one (csi-translation-lib's table, which
// Karpenter's driverFromSC consults).
var inTreeDrivers = map[string]string{
	"kubernetes.io/aws-ebs":         "ebs.csi.aws.com",
	"kubernetes.io/gce-pd":          "pd.csi.storage.gke.io",
	"kubernetes.io/azure-disk":      "disk.csi.azure.com",
	"kubernetes.io/azure-file":      "file.csi.azure.com",
	"kubernetes.io/cinder":          "cinder.csi.openstack.org",
	"kubernetes.io/vsphere-volume":  "csi.vsphere.vmware.com",
	"kubernetes.io/portworx-volume": "pxd.portworx.com",
}

// hasClaimVolume reports whether the pod mounts a claim (directly or as an
// ephemeral volume): only such pods can count against attach limits.
func hasClaimVolume(p *corev1.Pod) bool {
	for i := range p.Spec.Volumes {
		if v := &p.Spec.Volumes[i]; v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}

// attachments lists the pod's volumes that count against a CSI driver's
// limit, sorted and without duplicates (Karpenter GetVolumes): each claim
// resolved to its driver through its bound PV (spec.csi.driver, or an
// in-tree EBS volume), else its StorageClass's provisioner. Claims that
// resolve to no driver (NFS, host path, a class that is gone, no class)
// do not count. A missing claim counts only for an ephemeral volume, with
// the class of its template: the ephemeral volume controller creates that
// claim before the pod can be placed, where Karpenter skips a claim it
// cannot find.
func (v *volumeIndex) attachments(pod *corev1.Pod) []attachment {
	var out []attachment
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var name string
		var scName *string
		switch {
		case vol.PersistentVolumeClaim != nil:
			name = vol.PersistentVolumeClaim.ClaimName
		case vol.Ephemeral != nil:
			name = pod.Name + "-" + vol.Name
			if t := vol.Ephemeral.VolumeClaimTemplate; t != nil {
				scName = t.Spec.StorageClassName
			}
		default:
			continue
		}
		key := pod.Namespace + "/" + name
		driver := ""
		if pvc, ok := v.pvcs[key]; ok {
			driver = v.claimDriver(pvc)
		} else if scName != nil {
			driver = v.classDriver(*scName)
		}
		if driver != "" {
			out = append(out, attachment{driver: driver, claim: key})
		}
	}
	return dedupAttachments(out)
}

// claimDriver is Karpenter's ResolveDriver: a bound claim's PV's driver
// (none for a PV of no CSI driver), else its StorageClass's provisioner.
func (v *volumeIndex) claimDriver(pvc *corev1.PersistentVolumeClaim) string {
	if pvc.Spec.VolumeName != "" {
		pv, ok := v.pvs[pvc.Spec.VolumeName]
		switch {
		case !ok:
			return ""
		case pv.Spec.CSI != nil:
			return pv.Spec.CSI.Driver
		case pv.Spec.AWSElasticBlockStore != nil:
			return inTreeDrivers["kubernetes.io/aws-ebs"]
		}
		return ""
	}
	if pvc.Spec.StorageClassName == nil {
		return ""
	}
	return v.classDriver(*pvc.Spec.StorageClassName)
}

func (v *volumeIndex) classDriver(name string) string {
	sc, ok := v.scs[name]
	if name == "" || !ok {
		return ""
	}
	if d, ok := inTreeDrivers[sc.Provisioner]; ok {
		return d
	}
	return sc.Provisioner
}

func dedupAttachments(as []attachment) []attachment {
	if len(as) < 2 {
		return as
	}
	sort.Slice(as, func(i, j int) bool {
		if as[i].driver != as[j].driver {
			return as[i].driver < as[j].driver
		}
		return as[i].claim < as[j].claim
	})
	out := as[:1]
	for _, a := range as[1:] {
		if a != out[len(out)-1] {
			out = append(out, a)
		}
	}
	return out
}

// volumeUsage is an existing node's attached claims per driver, against
// its limits.
type volumeUsage struct {
	limits map[string]int
	used   map[string]map[string]bool // driver -> claims
}

func newVolumeUsage(limits map[string]int) *volumeUsage {
	return &volumeUsage{limits: limits, used: map[string]map[string]bool{}}
}

func (u *volumeUsage) add(as []attachment) {
	for _, a := range as {
		set := u.used[a.driver]
		if set == nil {
			set = map[string]bool{}
			u.used[a.driver] = set
		}
		set[a.claim] = true
	}
}

// pick returns the indexes of pods (each with its attachments) the node
// takes, in order and at most limit: each pod in turn, with the volumes of
// those picked before it, as Karpenter tries pod by pod. A pod fits when
// every limited driver it attaches a claim through has room for the
// claims not yet attached; only those drivers are checked, as the
// kube-scheduler's NodeVolumeLimits does (Karpenter's ExceedsLimits also
// refuses a pod without volumes on a node already over a limit, which the
// scheduler would still bind there).
func (u *volumeUsage) pick(pods [][]attachment, limit int) []int {
	var out []int
	var extra map[string]map[string]bool // claims the picked pods add
	for i, as := range pods {
		if len(out) == limit {
			break
		}
		if !u.fits(as, extra) {
			continue
		}
		for _, a := range as {
			if _, limited := u.limits[a.driver]; !limited || u.used[a.driver][a.claim] {
				continue
			}
			if extra == nil {
				extra = map[string]map[string]bool{}
			}
			if extra[a.driver] == nil {
				extra[a.driver] = map[string]bool{}
			}
			extra[a.driver][a.claim] = true
		}
		out = append(out, i)
	}
	return out
}

// fits reports whether the claims as adds, beyond those attached and
// extra, stay within every limit. as is sorted by driver, so each driver's
// new claims are counted in one run, without allocating.
func (u *volumeUsage) fits(as []attachment, extra map[string]map[string]bool) bool {
	adds, driver := 0, ""
	for _, a := range as {
		if a.driver != driver {
			adds, driver = 0, a.driver
		}
		limit, limited := u.limits[a.driver]
		if !limited || u.used[a.driver][a.claim] || extra[a.driver][a.claim] {
			continue
		}
		adds++
		if len(u.used[a.driver])+len(extra[a.driver])+adds > limit {
			return false
		}
	}
	return true
}

// shapeAttachments is, per pod of s (in s.pods order), the volumes it
// attaches; nil when none of its pods attaches any.
func (st *state) shapeAttachments(s *shape) [][]attachment {
	var out [][]attachment
	for i, p := range s.pods {
		if !hasClaimVolume(p) {
			continue
		}
		as := st.volIdx.attachments(p)
		if len(as) == 0 {
			continue
		}
		if out == nil {
			out = make([][]attachment, len(s.pods))
		}
		out[i] = as
	}
	return out
}

// buildVolumeUsage gives every existing node with volume limits the claims
// its pods attach, when some pending pod attaches a volume (else limits
// cannot refuse anything and the work is skipped).
func (st *state) buildVolumeUsage() {
	attaching := false
	for _, s := range st.shapes {
		attaching = attaching || s.attach != nil
	}
	if !attaching {
		return
	}
	for _, nd := range st.nodes {
		en := nd.src
		if en == nil || len(en.VolumeLimits) == 0 {
			continue
		}
		nd.vols = newVolumeUsage(en.VolumeLimits)
		for _, p := range claimPods(en) {
			nd.vols.add(st.volIdx.attachments(p))
		}
	}
}

// claimPods are en's pods that mount claims: from its digest when the
// caller made one, else read now.
func claimPods(en *ExistingNode) []*corev1.Pod {
	if en.Digest != nil {
		return en.Digest.claimPods
	}
	var out []*corev1.Pod
	for _, p := range en.Pods {
		if hasClaimVolume(p) {
			out = append(out, p)
		}
	}
	return out
}

// attachLimit is how many pods of s, from the next one to place and at
// most limit, existing node nd can attach the volumes of. Those pods are
// moved to the front of the pods still to place (a pod whose claims are
// attached there already may follow one that does not fit), so the next
// commit places them.
func (st *state) attachLimit(s *shape, nd *node, limit int) int {
	if nd.vols == nil || s.attach == nil {
		return limit
	}
	from := s.placedSoFar
	picked := nd.vols.pick(s.attach[from:], limit)
	if len(picked) == 0 || picked[len(picked)-1] == len(picked)-1 {
		return len(picked) // none, or already the first ones
	}
	pods := make([]*corev1.Pod, 0, len(s.pods)-from)
	att := make([][]attachment, 0, len(s.pods)-from)
	taken := make(map[int]bool, len(picked))
	for _, i := range picked {
		taken[i] = true
		pods, att = append(pods, s.pods[from+i]), append(att, s.attach[from+i])
	}
	for i := range len(s.pods) - from {
		if !taken[i] {
			pods, att = append(pods, s.pods[from+i]), append(att, s.attach[from+i])
		}
	}
	copy(s.pods[from:], pods)
	copy(s.attach[from:], att)
	return len(picked)
}

// attachPlaced records the volumes of the k pods of s about to be placed
// on nd (from s.placedSoFar).
func (st *state) attachPlaced(s *shape, nd *node, k int) {
	if nd.vols == nil || s.attach == nil {
		return
	}
	for _, as := range s.attach[s.placedSoFar : s.placedSoFar+k] {
		nd.vols.add(as)
	}
}
