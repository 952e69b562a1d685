package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// object takes one document: a List item by item, a kind that affects
// scheduling decoded and kept, any other kind noted as ignored.
func (p *parser) object(raw []byte, line int) error {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return fmt.Errorf("%s: %w", p.where(line), err)
	}
	if tm.Kind == "" {
		return fmt.Errorf("%s: document has no kind", p.where(line))
	}
	if strings.HasSuffix(tm.Kind, "List") {
		return p.list(raw, line, tm.Kind)
	}
	if take := p.taker(tm.APIVersion + "/" + tm.Kind); take != nil {
		return take(raw, line)
	}
	if want, known := wantVersion[tm.Kind]; known {
		return fmt.Errorf("%s: %s: apiVersion %q is not supported (want %s)", p.where(line), tm.Kind, tm.APIVersion, want)
	}
	p.warn(line, "%s %s ignored: it does not affect scheduling", tm.Kind, nameOf(raw))
	return nil
}

// list takes each item of a v1 List (or any *List kind) in order.
func (p *parser) list(raw []byte, line int, kind string) error {
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return fmt.Errorf("%s: %s: %w", p.where(line), kind, err)
	}
	for i, item := range list.Items {
		if err := p.object(item, line); err != nil {
			return fmt.Errorf("%s items[%d]: %w", kind, i, err)
		}
	}
	return nil
}

// taker returns what takes an object of the given apiVersion/kind, or nil
// when the input does not use that kind (or that version of it).
func (p *parser) taker(gvk string) func(raw []byte, line int) error {
	switch gvk {
	case "v1/Pod":
		return decoded(p, "Pod", p.pod)
	case "apps/v1/Deployment":
		return decoded(p, "Deployment", p.deployment)
	case "apps/v1/ReplicaSet":
		return decoded(p, "ReplicaSet", p.replicaSet)
	case "apps/v1/StatefulSet":
		return decoded(p, "StatefulSet", p.statefulSet)
	case "batch/v1/Job":
		return decoded(p, "Job", p.job)
	case "apps/v1/DaemonSet":
		return decoded(p, "DaemonSet", p.daemonSet)
	case "v1/Node":
		return decoded(p, "Node", p.node)
	case "v1/PersistentVolume":
		return decoded(p, "PersistentVolume", keep(&p.w.PersistentVolumes))
	case "v1/PersistentVolumeClaim":
		return decoded(p, "PersistentVolumeClaim", func(pvc *corev1.PersistentVolumeClaim, _ int) error {
			pvc.Namespace = ns(&pvc.ObjectMeta)
			p.w.PersistentVolumeClaims = append(p.w.PersistentVolumeClaims, pvc)
			return nil
		})
	case "storage.k8s.io/v1/StorageClass":
		return decoded(p, "StorageClass", keep(&p.w.StorageClasses))
	}
	return nil
}

// decoded returns a taker that decodes the document into a new T and hands
// it to take; kind names the object in a decoding error.
func decoded[T any](p *parser, kind string, take func(v *T, line int) error) func(raw []byte, line int) error {
	return func(raw []byte, line int) error {
		v := new(T)
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%s: %s: %w", p.where(line), kind, err)
		}
		return take(v, line)
	}
}

// keep returns a taker that appends the object to *dst as it is.
func keep[T any](dst *[]*T) func(v *T, line int) error {
	return func(v *T, _ int) error {
		*dst = append(*dst, v)
		return nil
	}
}

func (p *parser) deployment(d *appsv1.Deployment, line int) error {
	return p.replicated("Deployment", &d.ObjectMeta, d.Spec.Replicas, d.Spec.Selector, &d.Spec.Template, line, nil)
}

func (p *parser) replicaSet(rs *appsv1.ReplicaSet, line int) error {
	if owned(&rs.ObjectMeta) {
		// kubectl exports list both a Deployment and its ReplicaSets; the
		// pods are what count, and they are listed on their own.
		p.warn(line, "ReplicaSet %s/%s is owned by %s; its pods are taken from the Pod objects", ns(&rs.ObjectMeta), rs.Name, ownerName(&rs.ObjectMeta))
		return nil
	}
	return p.replicated("ReplicaSet", &rs.ObjectMeta, rs.Spec.Replicas, rs.Spec.Selector, &rs.Spec.Template, line, nil)
}

func (p *parser) statefulSet(s *appsv1.StatefulSet, line int) error {
	return p.replicated("StatefulSet", &s.ObjectMeta, s.Spec.Replicas, s.Spec.Selector, &s.Spec.Template, line, s.Spec.VolumeClaimTemplates)
}

func (p *parser) daemonSet(d *appsv1.DaemonSet, line int) error {
	if err := p.unique("DaemonSet", &d.ObjectMeta, line); err != nil {
		return err
	}
	if err := checkPodSpec(&d.Spec.Template.Spec); err != nil {
		return fmt.Errorf("%s: DaemonSet %s/%s: %w", p.where(line), ns(&d.ObjectMeta), d.Name, err)
	}
	d.Namespace = ns(&d.ObjectMeta)
	p.w.DaemonSets = append(p.w.DaemonSets, d)
	return nil
}

func (p *parser) node(n *corev1.Node, line int) error {
	if err := p.unique("Node", &n.ObjectMeta, line); err != nil {
		return err
	}
	p.w.Nodes = append(p.w.Nodes, &NodeWithPods{Node: n})
	return nil
}

var wantVersion = map[string]string{
	"Pod": "v1", "Node": "v1", "PersistentVolume": "v1", "PersistentVolumeClaim": "v1",
	"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1",
	"Job": "batch/v1", "StorageClass": "storage.k8s.io/v1",
}

func nameOf(raw []byte) string {
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = json.Unmarshal(raw, &m)
	if m.Metadata.Namespace != "" {
		return m.Metadata.Namespace + "/" + m.Metadata.Name
	}
	return m.Metadata.Name
}

// pod takes a Pod object: pending, bound to a node, or finished.
func (p *parser) pod(pod *corev1.Pod, line int) error {
	if err := checkPodSpec(&pod.Spec); err != nil {
		return fmt.Errorf("%s: Pod %s/%s: %w", p.where(line), ns(&pod.ObjectMeta), pod.Name, err)
	}
	if pod.Name == "" && pod.GenerateName != "" {
		pod.Name = pod.GenerateName + fmt.Sprint(p.seq)
	}
	if err := p.unique("Pod", &pod.ObjectMeta, line); err != nil {
		return err
	}
	pod.Namespace = ns(&pod.ObjectMeta)
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		p.warn(line, "Pod %s/%s is %s and uses no resources", pod.Namespace, pod.Name, pod.Status.Phase)
		return nil
	}
	p.stamp(pod)
	if pod.Spec.NodeName != "" {
		p.bound = append(p.bound, boundPod{pod, p.where(line)})
		if isDaemonPod(pod) {
			p.daemonPods = append(p.daemonPods, boundPod{pod, p.where(line)})
		}
		return nil
	}
	if len(pod.Spec.SchedulingGates) > 0 {
		// Gated pods are not yet schedulable; Karpenter does not provision for them.
		p.warn(line, "Pod %s/%s has scheduling gates and is not provisioned for", pod.Namespace, pod.Name)
		return nil
	}
	if isDaemonPod(pod) {
		p.daemonPods = append(p.daemonPods, boundPod{pod, p.where(line)})
		// A pending DaemonSet pod is the DaemonSet's business (it is counted as
		// overhead of the node it targets); Karpenter does not provision for it.
		p.warn(line, "Pod %s/%s belongs to a DaemonSet and is not provisioned for", pod.Namespace, pod.Name)
		return nil
	}
	pod.Status.Phase = corev1.PodPending
	p.w.Pods = append(p.w.Pods, pod)
	return nil
}

func isDaemonPod(pod *corev1.Pod) bool {
	o := metav1.GetControllerOfNoCopy(pod)
	return o != nil && o.Kind == "DaemonSet"
}

// stamp gives a pod deterministic UID and creation time when it has none.
func (p *parser) stamp(pod *corev1.Pod) {
	p.seq++
	if pod.UID == "" {
		sum := sha256.Sum256([]byte(pod.Namespace + "/" + pod.Name))
		h := hex.EncodeToString(sum[:16])
		pod.UID = types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
	}
	if pod.CreationTimestamp.IsZero() {
		pod.CreationTimestamp = metav1.NewTime(epoch.Add(time.Duration(p.seq) * time.Millisecond))
	}
}
