package provisioning

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// Annotations the provisioner puts on NodeClaims.
const (
	// AnnotationRun is the provisioner run (lease fencing token) that
	// created the claim.
	AnnotationRun = "nodewright.io/provisioner-run"
	// AnnotationLaunchTemplate is the launch template the instance came
	// from; launch-template garbage collection keeps the ones live claims name.
	AnnotationLaunchTemplate = "nodewright.io/launch-template"
)

var nameEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ClaimName names a claim planned in a run.
//
// Why it is built this way (the launch must never happen twice, and a claim
// name is also the CreateFleet idempotency key and the instance's
// karpenter.sh/nodeclaim tag):
//   - The name is a pure function of (NodePool, run token, re-plan round, the
//     sorted UIDs of the pods the plan put on the claim), so retrying a
//     write within a run (a lost DynamoDB response) finds the same record
//     (ErrAlreadyExists) instead of making a second one.
//   - The run token is the provisioner lease's fencing token, which only
//     ever grows. Names therefore never repeat across runs, even for the
//     same pods: a claim that was launched, failed and was deleted leaves a
//     tombstone, a ClientToken EC2 remembers and maybe a terminated instance
//     tagged with its name — a later claim for the same pods must not collide
//     with any of them.
//   - Crash safety does not rest on the name but on write-ahead order: the
//     record is created before CreateFleet is called, and every run first
//     resumes the live claims that have no Launched=True condition (Launch
//     adopts an instance already tagged with the claim's name, else calls
//     CreateFleet with the claim's token). So an instance can only exist for
//     a claim record, and a re-run after a crash at any point finds that
//     record in the store and completes it instead of planning a second one.
func ClaimName(nodePool string, run int64, round int, podUIDs []string) string {
	uids := append([]string(nil), podUIDs...)
	sort.Strings(uids)
	h := sha256.New()
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(run))
	binary.BigEndian.PutUint64(b[8:], uint64(round))
	h.Write([]byte(nodePool))
	h.Write([]byte{0})
	h.Write(b[:])
	for _, u := range uids {
		h.Write([]byte(u))
		h.Write([]byte{0})
	}
	return nodePool + "-" + nameEncoding.EncodeToString(h.Sum(nil))[:10]
}

func podUIDs(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = string(p.UID)
		if out[i] == "" {
			out[i] = p.Namespace + "/" + p.Name
		}
	}
	return out
}

// newClaim turns a planned claim into the record written before launch. Its
// labels are only what is certain before the instance exists (the
// template's, single-valued requirements', the values picked for other
// custom keys, the pool's and class's); the
// launched type's and zone's labels are added when the launch is recorded.
func newClaim(name string, p *scheduling.NodeClaimPlan, np *apis.NodePool, nc *apis.EC2NodeClass, run string, now metav1.Time) *apis.NodeClaim {
	tmpl := np.Spec.Template
	labels := map[string]string{}
	for k, v := range tmpl.ObjectMeta.Labels {
		labels[k] = v
	}
	reqs := make([]apis.NodeSelectorRequirementWithMinValues, 0, len(p.Requirements))
	for _, r := range p.Requirements {
		out := apis.NodeSelectorRequirementWithMinValues{Key: r.Key, Operator: r.Operator, Values: append([]string(nil), r.Values...)}
		if mv, ok := p.MinValues[r.Key]; ok && mv > 0 {
			out.MinValues = &mv
		}
		reqs = append(reqs, out)
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 && r.Key != catalog.LabelHostname {
			labels[r.Key] = r.Values[0]
		} else if v, ok := p.Labels[r.Key]; ok && !scheduling.IsWellKnownLabel(r.Key) && r.Key != catalog.LabelHostname {
			// The value the plan picked for a custom key (scheduling's
			// customlabels.go), as Karpenter labels its NodeClaims.
			labels[r.Key] = v
		}
	}
	labels[apis.NodePoolLabelKey] = np.Name
	annotations := map[string]string{AnnotationRun: run, apis.NodePoolHashAnnotKey: np.Hash()}
	for k, v := range tmpl.ObjectMeta.Annotations {
		annotations[k] = v
	}
	if p.MinValuesRelaxed {
		annotations[apis.MinValuesRelaxedAnnotKey] = "true"
	}
	cl := &apis.NodeClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: apis.NodePoolAPIV1, Kind: apis.NodeClaimKind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations, CreationTimestamp: now},
		Spec: apis.NodeClaimSpec{
			Requirements:           reqs,
			Taints:                 append([]corev1.Taint(nil), p.Taints...),
			StartupTaints:          append([]corev1.Taint(nil), p.StartupTaints...),
			Resources:              apis.ResourceRequirements{Requests: p.Requests.DeepCopy()},
			NodeClassRef:           tmpl.Spec.NodeClassRef,
			ExpireAfter:            tmpl.Spec.ExpireAfter,
			TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
		},
		NodePoolHash: np.Hash(),
	}
	if nc != nil {
		labels[apis.NodeClassLabelKey] = nc.Name
		annotations[apis.NodeClassHashAnnotKey] = nc.Hash()
		cl.NodeClassHash = nc.Hash()
	}
	return cl
}

// launchTypes resolves a claim's options in the catalog, with the reserved
// offerings of its EC2NodeClass. Options the catalog no longer lists are
// skipped; none left means the claim cannot launch.
func launchTypes(cat *catalog.Catalog, cl *apis.NodeClaim) []*catalog.InstanceType {
	if cl.Spec.NodeClassRef != nil {
		cat = cat.ForNodeClass(cl.Spec.NodeClassRef.Name)
	}
	names := catalog.ClaimTypeOptions(cl)
	out := make([]*catalog.InstanceType, 0, len(names))
	for _, n := range names {
		if it, ok := cat.Get(n); ok {
			out = append(out, it)
		}
	}
	return out
}

// recordLaunch writes what the launch produced onto the claim: the
// instance's identity, the labels its node will carry, its capacity and
// allocatable, and Launched=True.
func recordLaunch(cl *apis.NodeClaim, inst launched, now metav1.Time) {
	if cl.Labels == nil {
		cl.Labels = map[string]string{}
	}
	for k, v := range inst.labels {
		cl.Labels[k] = v
	}
	cl.Labels[catalog.LabelInstanceType] = inst.Type
	if inst.Zone != "" {
		cl.Labels[catalog.LabelTopologyZone] = inst.Zone
	}
	cl.Labels[apis.CapacityTypeLabelKey] = inst.CapacityType
	inst.RecordReservation(cl)
	inst.RecordPlacement(cl)
	if inst.LaunchTemplate != "" {
		if cl.Annotations == nil {
			cl.Annotations = map[string]string{}
		}
		cl.Annotations[AnnotationLaunchTemplate] = inst.LaunchTemplate
	}
	cl.Status.InstanceID = inst.ID
	cl.Status.ProviderID = inst.ProviderID()
	cl.Status.ImageID = inst.ImageID
	if len(inst.capacity) > 0 {
		cl.Status.Capacity = inst.capacity
	}
	if len(inst.allocatable) > 0 {
		cl.Status.Allocatable = inst.allocatable
	}
	cl.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched",
		"instance "+inst.ID+" ("+inst.Type+", "+inst.Zone+", "+inst.CapacityType+")", now)
}

// oneLine flattens an error for a condition message.
func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > 1000 {
		s = s[:1000]
	}
	return s
}
