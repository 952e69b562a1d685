// Package workload reads Kubernetes manifests a person would apply or
// export (multi-document YAML or JSON, or a v1 List) and turns them into what
// the solver consumes: pending pods expanded from their controllers, the
// DaemonSets that add per-node overhead, volumes, and existing nodes with the
// pods bound to them.
package workload

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
