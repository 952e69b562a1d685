// Package workload reads Kubernetes manifests a person would apply or
// export (multi-document YAML or JSON, or a v1 List) and turns them into what
// the solver consumes: pending pods expanded from their controllers, the
// DaemonSets that add per-node overhead, volumes, and existing nodes with the
// pods bound to them.
package workload

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"
)

// MaxReplicas bounds the pods one controller may expand to, so a typo such as
// replicas: 10000000 fails clearly instead of exhausting memory; MaxPods
// bounds the whole input's pods and StatefulSet claims the same way (a few
// controllers of MaxReplicas each, or one StatefulSet with many claim
// templates, would take gigabytes from a file of a few hundred bytes).
const (
	MaxReplicas = 1_000_000
	MaxPods     = 1_000_000
)

// Workload is everything read from one or more manifest files.
type Workload struct {
	// Pods are the pending pods, in file order (controllers expanded in place).
	Pods []*corev1.Pod
	// DaemonSets run on every compatible new node.
	DaemonSets             []*appsv1.DaemonSet
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
	// Nodes are existing nodes, each with the pods bound to it.
	Nodes []*NodeWithPods
	// Warnings name documents that were read but not used (a Service, a
	// finished pod, a pod bound to a node the input does not contain, ...).
	Warnings []string
}

// NodeWithPods is an existing node and the pods already running on it.
type NodeWithPods struct {
	Node *corev1.Node
	Pods []*corev1.Pod
}

// Source is one manifest stream; Name is used in errors (usually the file name).
type Source struct {
	Name   string
	Reader io.Reader
}

// ParseFiles reads manifest files as one input (a pod in one file may be
// bound to a node listed in another).
func ParseFiles(paths ...string) (*Workload, error) {
	srcs := make([]Source, 0, len(paths))
	for _, path := range paths {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		srcs = append(srcs, Source{Name: path, Reader: f})
	}
	return ParseSources(srcs...)
}

// Parse reads manifests from r.
func Parse(r io.Reader, name string) (*Workload, error) {
	return ParseSources(Source{Name: name, Reader: r})
}

// ParseSources reads manifests. Pods that carry spec.nodeName are bound pods:
// they are attached to their Node. Pods without nodeName that are not
// finished are pending.
func ParseSources(srcs ...Source) (*Workload, error) {
	return parseSources(MaxPods, srcs...)
}

func parseSources(maxPods int, srcs ...Source) (*Workload, error) {
	p := &parser{w: &Workload{}, names: map[string]string{}, maxPods: maxPods}
	for _, src := range srcs {
		docs, err := splitDocuments(src.Reader, src.Name)
		if err != nil {
			return nil, err
		}
		p.source = src.Name
		for _, d := range docs {
			if err := p.object(d.raw, d.line); err != nil {
				return nil, err
			}
		}
	}
	p.attachBoundPods()
	p.inferDaemonSets()
	return p.w, nil
}

type document struct {
	raw  []byte // JSON
	line int
}

// splitDocuments turns a YAML stream (JSON is YAML) into one JSON document
// per non-empty YAML document, remembering where each started.
func splitDocuments(r io.Reader, source string) ([]document, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", source, err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []document
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if len(n.Content) == 0 || (n.Content[0].Kind == yaml.ScalarNode && n.Content[0].Tag == "!!null") {
			continue
		}
		line := n.Content[0].Line
		if n.Content[0].Kind != yaml.MappingNode {
			return nil, fmt.Errorf("%s:%d: document is not an object", source, line)
		}
		y, err := yaml.Marshal(&n)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", source, line, err)
		}
		j, err := sigsyaml.YAMLToJSON(y)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", source, line, err)
		}
		docs = append(docs, document{raw: j, line: line})
	}
	return docs, nil
}

type parser struct {
	source string
	w      *Workload
	seq    int               // creation order, for deterministic timestamps
	names  map[string]string // kind/namespace/name -> where first seen
	bound  []boundPod
	// daemonPods are DaemonSet-owned pods, used to infer DaemonSets the input
	// does not list (a `kubectl get nodes,pods` export has pods, not DaemonSets).
	daemonPods []boundPod
	maxPods    int
}

type boundPod struct {
	pod   *corev1.Pod
	where string
}

// epoch is the creation time given to expanded pods: fixed so equal input
// gives equal plans, and increasing with file order so the solver's
// oldest-first tie break follows the file.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func (p *parser) where(line int) string { return fmt.Sprintf("%s:%d", p.source, line) }

func (p *parser) object(raw []byte, line int) error {
	var tm metav1.TypeMeta
	if err := json.Unmarshal(raw, &tm); err != nil {
		return fmt.Errorf("%s: %w", p.where(line), err)
	}
	if tm.Kind == "" {
		return fmt.Errorf("%s: document has no kind", p.where(line))
	}
	if strings.HasSuffix(tm.Kind, "List") {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("%s: %s: %w", p.where(line), tm.Kind, err)
		}
		for i, item := range list.Items {
			if err := p.object(item, line); err != nil {
				return fmt.Errorf("%s items[%d]: %w", tm.Kind, i, err)
			}
		}
		return nil
	}
	gvk := tm.APIVersion + "/" + tm.Kind
	decode := func(v any) error {
		if err := json.Unmarshal(raw, v); err != nil {
			return fmt.Errorf("%s: %s: %w", p.where(line), tm.Kind, err)
		}
		return nil
	}
	switch gvk {
	case "v1/Pod":
		var pod corev1.Pod
		if err := decode(&pod); err != nil {
			return err
		}
		return p.pod(&pod, line)
	case "apps/v1/Deployment":
		var d appsv1.Deployment
		if err := decode(&d); err != nil {
			return err
		}
		return p.replicated("Deployment", &d.ObjectMeta, d.Spec.Replicas, d.Spec.Selector, &d.Spec.Template, line, nil)
	case "apps/v1/ReplicaSet":
		var rs appsv1.ReplicaSet
		if err := decode(&rs); err != nil {
			return err
		}
		if owned(&rs.ObjectMeta) {
			// kubectl exports list both a Deployment and its ReplicaSets; the
			// pods are what count, and they are listed on their own.
			p.warn(line, "ReplicaSet %s/%s is owned by %s; its pods are taken from the Pod objects", ns(&rs.ObjectMeta), rs.Name, ownerName(&rs.ObjectMeta))
			return nil
		}
		return p.replicated("ReplicaSet", &rs.ObjectMeta, rs.Spec.Replicas, rs.Spec.Selector, &rs.Spec.Template, line, nil)
	case "apps/v1/StatefulSet":
		var s appsv1.StatefulSet
		if err := decode(&s); err != nil {
			return err
		}
		return p.replicated("StatefulSet", &s.ObjectMeta, s.Spec.Replicas, s.Spec.Selector, &s.Spec.Template, line, s.Spec.VolumeClaimTemplates)
	case "batch/v1/Job":
		var j batchv1.Job
		if err := decode(&j); err != nil {
			return err
		}
		return p.job(&j, line)
	case "apps/v1/DaemonSet":
		var d appsv1.DaemonSet
		if err := decode(&d); err != nil {
			return err
		}
		if err := p.unique("DaemonSet", &d.ObjectMeta, line); err != nil {
			return err
		}
		if err := checkPodSpec(&d.Spec.Template.Spec); err != nil {
			return fmt.Errorf("%s: DaemonSet %s/%s: %w", p.where(line), ns(&d.ObjectMeta), d.Name, err)
		}
		d.Namespace = ns(&d.ObjectMeta)
		p.w.DaemonSets = append(p.w.DaemonSets, &d)
	case "v1/Node":
		var n corev1.Node
		if err := decode(&n); err != nil {
			return err
		}
		if err := p.unique("Node", &n.ObjectMeta, line); err != nil {
			return err
		}
		p.w.Nodes = append(p.w.Nodes, &NodeWithPods{Node: &n})
	case "v1/PersistentVolume":
		var pv corev1.PersistentVolume
		if err := decode(&pv); err != nil {
			return err
		}
		p.w.PersistentVolumes = append(p.w.PersistentVolumes, &pv)
	case "v1/PersistentVolumeClaim":
		var pvc corev1.PersistentVolumeClaim
		if err := decode(&pvc); err != nil {
			return err
		}
		pvc.Namespace = ns(&pvc.ObjectMeta)
		p.w.PersistentVolumeClaims = append(p.w.PersistentVolumeClaims, &pvc)
	case "storage.k8s.io/v1/StorageClass":
		var sc storagev1.StorageClass
		if err := decode(&sc); err != nil {
			return err
		}
		p.w.StorageClasses = append(p.w.StorageClasses, &sc)
	default:
		switch tm.Kind {
		case "Pod", "Deployment", "ReplicaSet", "StatefulSet", "Job", "DaemonSet", "Node",
			"PersistentVolume", "PersistentVolumeClaim", "StorageClass":
			return fmt.Errorf("%s: %s: apiVersion %q is not supported (want %s)", p.where(line), tm.Kind, tm.APIVersion, wantVersion[tm.Kind])
		}
		p.warn(line, "%s %s ignored: it does not affect scheduling", tm.Kind, nameOf(raw))
	}
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

// room fails when n more objects (pods, and a StatefulSet's claims) would
// take the input past its limit.
func (p *parser) room(what string, n int) error {
	if len(p.w.Pods)+len(p.w.PersistentVolumeClaims)+n > p.maxPods {
		return fmt.Errorf("%s: %d more pods and claims would take the input past %d", what, n, p.maxPods)
	}
	return nil
}

func (p *parser) warn(line int, format string, args ...any) {
	p.w.Warnings = append(p.w.Warnings, p.where(line)+": "+fmt.Sprintf(format, args...))
}

func ns(m *metav1.ObjectMeta) string {
	if m.Namespace == "" {
		return metav1.NamespaceDefault
	}
	return m.Namespace
}

func owned(m *metav1.ObjectMeta) bool { return metav1.GetControllerOfNoCopy(m) != nil }

func ownerName(m *metav1.ObjectMeta) string {
	if o := metav1.GetControllerOfNoCopy(m); o != nil {
		return o.Kind + " " + o.Name
	}
	return ""
}

// unique rejects a second object of the same kind and name: two Deployments
// called "web" would expand to clashing pod names.
func (p *parser) unique(kind string, m *metav1.ObjectMeta, line int) error {
	if m.Name == "" {
		return fmt.Errorf("%s: %s has no metadata.name", p.where(line), kind)
	}
	key := kind + "/" + ns(m) + "/" + m.Name
	if kind == "Node" {
		key = kind + "/" + m.Name
	}
	if first, dup := p.names[key]; dup {
		return fmt.Errorf("%s: %s %s/%s is defined twice (first at %s)", p.where(line), kind, ns(m), m.Name, first)
	}
	p.names[key] = p.where(line)
	return nil
}

func checkPodSpec(spec *corev1.PodSpec) error {
	if len(spec.Containers) == 0 {
		return errors.New("pod template has no containers")
	}
	return nil
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

// replicated expands a Deployment, ReplicaSet or StatefulSet into
// <name>-<i> pods, i from 0.
func (p *parser) replicated(kind string, m *metav1.ObjectMeta, replicas *int32, sel *metav1.LabelSelector,
	tmpl *corev1.PodTemplateSpec, line int, claims []corev1.PersistentVolumeClaim) error {
	if err := p.unique(kind, m, line); err != nil {
		return err
	}
	what := fmt.Sprintf("%s: %s %s/%s", p.where(line), kind, ns(m), m.Name)
	n := int32(1)
	if replicas != nil {
		n = *replicas
	}
	if n < 0 || n > MaxReplicas {
		return fmt.Errorf("%s: spec.replicas %d is out of range [0, %d]", what, n, MaxReplicas)
	}
	if err := p.room(what, int(n)*(1+len(claims))); err != nil {
		return err
	}
	if err := checkTemplate(sel, tmpl); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	extra := map[string]string{}
	if kind == "Deployment" {
		// Real pods carry pod-template-hash; topology spread matchLabelKeys
		// commonly names it.
		extra[appsv1.DefaultDeploymentUniqueLabelKey] = templateHash(tmpl)
	}
	for i := int32(0); i < n; i++ {
		pod := p.fromTemplate(kind, m, tmpl, fmt.Sprintf("%s-%d", m.Name, i), extra)
		if kind == "StatefulSet" {
			pod.Labels[appsv1.StatefulSetPodNameLabel] = pod.Name
			pod.Labels[appsv1.PodIndexLabel] = fmt.Sprint(i)
			pod.Spec.Hostname = pod.Name
			for _, c := range claims {
				pvc := c.DeepCopy()
				pvc.Name = fmt.Sprintf("%s-%s", c.Name, pod.Name)
				pvc.Namespace = pod.Namespace
				pvc.Labels = mergeLabels(pvc.Labels, tmpl.Labels)
				p.w.PersistentVolumeClaims = append(p.w.PersistentVolumeClaims, pvc)
				setClaimVolume(pod, c.Name, pvc.Name)
			}
		}
		p.w.Pods = append(p.w.Pods, pod)
	}
	return nil
}

// setClaimVolume points the pod's volume called name at claim, adding the
// volume when the template does not declare it (as the StatefulSet controller does).
func setClaimVolume(pod *corev1.Pod, name, claim string) {
	src := corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			pod.Spec.Volumes[i].VolumeSource = src
			return
		}
	}
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: name, VolumeSource: src})
}

func (p *parser) job(j *batchv1.Job, line int) error {
	if err := p.unique("Job", &j.ObjectMeta, line); err != nil {
		return err
	}
	what := fmt.Sprintf("%s: Job %s/%s", p.where(line), ns(&j.ObjectMeta), j.Name)
	n := int32(1)
	if j.Spec.Parallelism != nil {
		n = *j.Spec.Parallelism
	}
	if n < 0 || n > MaxReplicas {
		return fmt.Errorf("%s: spec.parallelism %d is out of range [0, %d]", what, n, MaxReplicas)
	}
	if err := p.room(what, int(n)); err != nil {
		return err
	}
	if c := j.Spec.Completions; c != nil {
		if *c < 0 {
			return fmt.Errorf("%s: spec.completions %d is negative", what, *c)
		}
		// No more pods run at once than there are completions left.
		n = min(n, *c)
	}
	if j.Spec.Suspend != nil && *j.Spec.Suspend {
		p.warn(line, "Job %s/%s is suspended and runs no pods", ns(&j.ObjectMeta), j.Name)
		return nil
	}
	// The Job controller generates the selector; a manual one must match.
	if j.Spec.Selector != nil {
		if err := checkTemplate(j.Spec.Selector, &j.Spec.Template); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	} else if err := checkPodSpec(&j.Spec.Template.Spec); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	extra := map[string]string{batchv1.JobNameLabel: j.Name, "job-name": j.Name}
	for i := int32(0); i < n; i++ {
		pod := p.fromTemplate("Job", &j.ObjectMeta, &j.Spec.Template, fmt.Sprintf("%s-%d", j.Name, i), extra)
		if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
			pod.Labels[batchv1.JobCompletionIndexAnnotation] = fmt.Sprint(i)
		}
		p.w.Pods = append(p.w.Pods, pod)
	}
	return nil
}

func checkTemplate(sel *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec) error {
	if err := checkPodSpec(&tmpl.Spec); err != nil {
		return err
	}
	if sel == nil {
		return errors.New("spec.selector is required")
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return fmt.Errorf("spec.selector: %w", err)
	}
	if s.Empty() {
		return errors.New("spec.selector is empty")
	}
	if !s.Matches(labelsSet(tmpl.Labels)) {
		return fmt.Errorf("spec.selector %s does not match the template labels %v", s.String(), tmpl.Labels)
	}
	return nil
}

type labelsSet map[string]string

func (l labelsSet) Has(k string) bool              { _, ok := l[k]; return ok }
func (l labelsSet) Get(k string) string            { return l[k] }
func (l labelsSet) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

func (p *parser) fromTemplate(kind string, owner *metav1.ObjectMeta, tmpl *corev1.PodTemplateSpec, name string, extra map[string]string) *corev1.Pod {
	t := true
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   ns(owner),
			Labels:      mergeLabels(tmpl.Labels, extra),
			Annotations: mergeLabels(tmpl.Annotations, nil),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: ownerAPIVersion[kind], Kind: kind, Name: owner.Name, UID: owner.UID, Controller: &t,
			}},
		},
		Spec:   *tmpl.Spec.DeepCopy(),
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	p.stamp(pod)
	return pod
}

var ownerAPIVersion = map[string]string{
	"Deployment": "apps/v1", "ReplicaSet": "apps/v1", "StatefulSet": "apps/v1", "Job": "batch/v1",
}

func mergeLabels(a, b map[string]string) map[string]string {
	out := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// templateHash is a short stable hash of a pod template, like pod-template-hash.
func templateHash(t *corev1.PodTemplateSpec) string {
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:10]
}

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
