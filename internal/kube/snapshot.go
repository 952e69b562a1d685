package kube

import (
	"context"
	"fmt"
	"sort"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/encoding/protowire"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Snapshot is the cluster state one controller pass works from. Objects are
// read-only projections: fields no nodewright decision uses (managedFields,
// last-applied annotations, container env/commands/probes, container
// statuses, node images) are stripped to keep a 50,000-pod snapshot small,
// so they must never be written back to the API server.
type Snapshot struct {
	// PendingPods are unbound pods the scheduler marked
	// PodScheduled=False/Unschedulable, sorted by namespace/name.
	PendingPods []*corev1.Pod
	// OtherPendingPods are unbound Pending pods the scheduler has not (yet)
	// found unschedulable; the provisioner leaves them alone.
	OtherPendingPods int
	Nodes            []*corev1.Node
	// PodsByNode holds the non-terminal pods bound to each node.
	PodsByNode             map[string][]*corev1.Pod
	PDBs                   []*policyv1.PodDisruptionBudget
	DaemonSets             []*appsv1.DaemonSet
	PersistentVolumes      []*corev1.PersistentVolume
	PersistentVolumeClaims []*corev1.PersistentVolumeClaim
	StorageClasses         []*storagev1.StorageClass
	CSINodes               []*storagev1.CSINode
	VolumeAttachments      []*storagev1.VolumeAttachment
	// NamespaceLabels maps namespace name to its labels, for pod
	// (anti-)affinity namespaceSelectors (scheduling.Options.NamespaceLabels).
	NamespaceLabels map[string]map[string]string
	// TakenAt is when the snapshot started; Duration how long it took.
	TakenAt  time.Time
	Duration time.Duration
}

// Parts selects what a snapshot lists; the zero value means everything.
type Parts uint

const (
	PartPendingPods Parts = 1 << iota
	PartBoundPods
	PartNodes
	PartPDBs
	PartDaemonSets
	// PartVolumes covers PVs, PVCs, StorageClasses, CSINodes and VolumeAttachments.
	PartVolumes
	// PartNamespaces fills NamespaceLabels.
	PartNamespaces
	PartAll = PartPendingPods | PartBoundPods | PartNodes | PartPDBs | PartDaemonSets | PartVolumes | PartNamespaces
)

// SnapshotOptions tune a snapshot.
type SnapshotOptions struct {
	Parts Parts
	// PageSize is the list limit per request (default 500, like kubectl).
	PageSize int64
	// Cached serves the lists from the API server's watch cache
	// (resourceVersion=0) instead of a quorum read of etcd: far cheaper for
	// the API server and etcd, and as fresh as the cache (normally well
	// under a second behind); and it reuses this client's last cached
	// snapshot's pods of the nodes whose pods did not change (podreuse.go).
	// Only for decisions that re-read what they act on before removing
	// capacity.
	Cached bool
}

// Field selectors the API server evaluates for pods, so unbound and bound
// pods come from two disjoint lists and terminal pods never leave etcd.
const (
	pendingPodSelector = "spec.nodeName=,status.phase=Pending"
	boundPodSelector   = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
)

// Snapshot lists the selected parts concurrently, each paginated with
// limit/continue.
func (c *Client) Snapshot(ctx context.Context, opts SnapshotOptions) (*Snapshot, error) {
	parts := opts.Parts
	if parts == 0 {
		parts = PartAll
	}
	page := opts.PageSize
	if page <= 0 {
		page = 500
	}
	s := &Snapshot{TakenAt: c.now()}
	g, ctx := errgroup.WithContext(ctx)
	l := lister{page: page}
	if opts.Cached && !c.fullLists.Load() {
		l.base.ResourceVersion, l.cached = "0", true
	}
	for _, list := range c.snapshotLists(ctx, s, parts, l) {
		g.Go(list)
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("cluster snapshot: %w", err)
	}
	sort.Slice(s.PendingPods, func(i, j int) bool { return podKey(s.PendingPods[i]) < podKey(s.PendingPods[j]) })
	s.Duration = c.now().Sub(s.TakenAt)
	return s, nil
}

// snapshotLists returns one list call per resource the parts cover, each
// filling its field of s (no two calls write the same field).
func (c *Client) snapshotLists(ctx context.Context, s *Snapshot, parts Parts, l lister) []func() error {
	cs := c.cs
	var lists []func() error
	if parts&PartPendingPods != 0 {
		lists = append(lists, func() error { return c.listPendingPods(ctx, s, l) })
	}
	if parts&PartBoundPods != 0 {
		bound := c.listBoundPods
		if l.cached {
			bound = c.listBoundPodsReusing
		}
		lists = append(lists, func() error { return bound(ctx, s, l) })
	}
	if parts&PartNodes != 0 {
		lists = append(lists, listInto(ctx, &s.Nodes, "nodes", l, c.nodePager()))
	}
	if parts&PartPDBs != 0 {
		lists = append(lists, listInto(ctx, &s.PDBs, "poddisruptionbudgets", l, typedPager(cs.PolicyV1().PodDisruptionBudgets("").List,
			func(l *policyv1.PodDisruptionBudgetList) []policyv1.PodDisruptionBudget { return l.Items }, stripMeta[policyv1.PodDisruptionBudget])))
	}
	if parts&PartDaemonSets != 0 {
		lists = append(lists, listInto(ctx, &s.DaemonSets, "daemonsets", l, typedPager(cs.AppsV1().DaemonSets("").List,
			func(l *appsv1.DaemonSetList) []appsv1.DaemonSet { return l.Items }, stripDaemonSet)))
	}
	if parts&PartVolumes != 0 {
		lists = append(lists,
			listInto(ctx, &s.PersistentVolumes, "persistentvolumes", l, typedPager(cs.CoreV1().PersistentVolumes().List,
				func(l *corev1.PersistentVolumeList) []corev1.PersistentVolume { return l.Items }, stripMeta[corev1.PersistentVolume])),
			listInto(ctx, &s.PersistentVolumeClaims, "persistentvolumeclaims", l, typedPager(cs.CoreV1().PersistentVolumeClaims("").List,
				func(l *corev1.PersistentVolumeClaimList) []corev1.PersistentVolumeClaim { return l.Items }, stripMeta[corev1.PersistentVolumeClaim])),
			listInto(ctx, &s.StorageClasses, "storageclasses", l, typedPager(cs.StorageV1().StorageClasses().List,
				func(l *storagev1.StorageClassList) []storagev1.StorageClass { return l.Items }, stripMeta[storagev1.StorageClass])),
			listInto(ctx, &s.CSINodes, "csinodes", l, typedPager(cs.StorageV1().CSINodes().List,
				func(l *storagev1.CSINodeList) []storagev1.CSINode { return l.Items }, stripMeta[storagev1.CSINode])),
			listInto(ctx, &s.VolumeAttachments, "volumeattachments", l, volumeAttachmentPager(cs)))
	}
	if parts&PartNamespaces != 0 {
		lists = append(lists, func() error { return c.listNamespaceLabels(ctx, s, l) })
	}
	return lists
}

// lister is how a snapshot lists: the page size, and the options every
// first page carries (resourceVersion=0 for the watch cache).
type lister struct {
	page int64
	base metav1.ListOptions
	// cached: from the watch cache, reusing unchanged nodes' pods
	// (podreuse.go).
	cached bool
}

// with is the base options with a field selector.
func (l lister) with(fieldSelector string) metav1.ListOptions {
	o := l.base
	o.FieldSelector = fieldSelector
	return o
}

// listInto returns a call that lists one whole resource into *dst.
func listInto[T any](ctx context.Context, dst *[]*T, what string, l lister, fetch pager[T]) func() error {
	return func() (err error) {
		*dst, err = listAll(ctx, what, l.page, l.base, fetch)
		return err
	}
}

func volumeAttachmentPager(cs kubernetes.Interface) pager[storagev1.VolumeAttachment] {
	return typedPager(cs.StorageV1().VolumeAttachments().List,
		func(l *storagev1.VolumeAttachmentList) []storagev1.VolumeAttachment { return l.Items }, stripMeta[storagev1.VolumeAttachment])
}

// listPendingPods keeps the pending pods the scheduler found no node for and
// counts the others (not yet tried, or waiting on something else).
func (c *Client) listPendingPods(ctx context.Context, s *Snapshot, l lister) error {
	pods, err := listAll(ctx, "pending pods", l.page, l.with(pendingPodSelector), c.podPager(podPrune, stripPod))
	if err != nil {
		return err
	}
	for _, p := range pods {
		if isUnschedulable(p) {
			s.PendingPods = append(s.PendingPods, p)
		} else {
			s.OtherPendingPods++
		}
	}
	return nil
}

// listBoundPods groups the non-terminal bound pods by node.
func (c *Client) listBoundPods(ctx context.Context, s *Snapshot, l lister) error {
	pods, err := listAll(ctx, "bound pods", l.page, l.with(boundPodSelector), c.podPager(podPrune, stripPod))
	if err != nil {
		return err
	}
	s.PodsByNode = make(map[string][]*corev1.Pod)
	for _, p := range pods {
		s.PodsByNode[p.Spec.NodeName] = append(s.PodsByNode[p.Spec.NodeName], p)
	}
	return nil
}

// listNamespaceLabels fills NamespaceLabels.
func (c *Client) listNamespaceLabels(ctx context.Context, s *Snapshot, l lister) error {
	nss, err := listAll(ctx, "namespaces", l.page, l.base, typedPager(c.cs.CoreV1().Namespaces().List,
		func(l *corev1.NamespaceList) []corev1.Namespace { return l.Items }, stripMeta[corev1.Namespace]))
	if err != nil {
		return err
	}
	s.NamespaceLabels = make(map[string]map[string]string, len(nss))
	for _, ns := range nss {
		s.NamespaceLabels[ns.Name] = ns.Labels
	}
	return nil
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// isUnschedulable is the scheduler's verdict that no node fits the pod.
func isUnschedulable(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled {
			return c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable
		}
	}
	return false
}

func stripObjectMeta(m *metav1.ObjectMeta) {
	m.ManagedFields = nil
	delete(m.Annotations, corev1.LastAppliedConfigAnnotation)
}

func stripMeta[T any](obj *T) {
	if o, ok := any(obj).(metav1.ObjectMetaAccessor); ok {
		if m, ok := o.GetObjectMeta().(*metav1.ObjectMeta); ok {
			stripObjectMeta(m)
		}
	}
}

func stripContainers(cs []corev1.Container) {
	for i := range cs {
		c := &cs[i]
		c.Command, c.Args, c.Env, c.EnvFrom = nil, nil, nil, nil
		c.LivenessProbe, c.ReadinessProbe, c.StartupProbe, c.Lifecycle = nil, nil, nil, nil
		c.TerminationMessagePath, c.WorkingDir = "", ""
	}
}

func stripPod(p *corev1.Pod) {
	stripObjectMeta(&p.ObjectMeta)
	stripVolumes(p.Spec.Volumes)
	stripContainers(p.Spec.Containers)
	stripContainers(p.Spec.InitContainers)
	p.Spec.EphemeralContainers = nil
	p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil, nil
}

// stripVolumes keeps of each volume its name and the claim it mounts
// (persistentVolumeClaim, ephemeral): all that scheduling and termination
// read. The service account token's projected volume of every pod was a
// tenth of 40,000 bound pods' heap.
func stripVolumes(vs []corev1.Volume) {
	for i := range vs {
		src := &vs[i].VolumeSource
		*src = corev1.VolumeSource{PersistentVolumeClaim: src.PersistentVolumeClaim, Ephemeral: src.Ephemeral}
	}
}

func stripNode(n *corev1.Node) {
	stripObjectMeta(&n.ObjectMeta)
	n.Status.Images = nil
}

func stripDaemonSet(d *appsv1.DaemonSet) {
	stripObjectMeta(&d.ObjectMeta)
	stripObjectMeta(&d.Spec.Template.ObjectMeta)
	stripContainers(d.Spec.Template.Spec.Containers)
	stripContainers(d.Spec.Template.Spec.InitContainers)
}

// PodsOnNode lists the non-terminal pods bound to one node (the drain's
// working set), paginated, without a full snapshot.
func (c *Client) PodsOnNode(ctx context.Context, node string) ([]*corev1.Pod, error) {
	return c.podsOnNode(ctx, node, objectMetaOnly, func(p *corev1.Pod) { stripObjectMeta(&p.ObjectMeta) })
}

// objectMetaOnly prunes a pod's metadata as stripObjectMeta strips it.
var objectMetaOnly = &pruneRule{nested: map[protowire.Number]*pruneRule{1: objectMetaPrune}}

// podsOnNode lists a node's non-terminal pods, each pruned by prune and
// stripped by strip.
func (c *Client) podsOnNode(ctx context.Context, node string, prune *pruneRule, strip func(*corev1.Pod)) ([]*corev1.Pod, error) {
	sel := "spec.nodeName=" + node + ",status.phase!=Succeeded,status.phase!=Failed"
	return listAll(ctx, "pods on node "+node, 500, metav1.ListOptions{FieldSelector: sel}, c.podPager(prune, strip))
}

// VolumeAttachmentsOnNode lists the VolumeAttachments of one node; the
// termination workflow waits for them to detach before terminating the
// instance. (The API has no field selector for spec.nodeName.)
func (c *Client) VolumeAttachmentsOnNode(ctx context.Context, node string) ([]*storagev1.VolumeAttachment, error) {
	all, err := listAll(ctx, "volumeattachments", 500, metav1.ListOptions{}, volumeAttachmentPager(c.cs))
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, va := range all {
		if va.Spec.NodeName == node {
			out = append(out, va)
		}
	}
	return out, nil
}
