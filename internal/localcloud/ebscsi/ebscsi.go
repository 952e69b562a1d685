// Package ebscsi is the local cloud's stand-in for the AWS EBS CSI driver:
// volumes behave as on EKS without a kubelet or EC2 volumes. It installs the
// driver's CSIDriver and a gp3 StorageClass (WaitForFirstConsumer), gives
// every node a CSINode with the instance type's attachment limit (the
// scheduler's NodeVolumeLimits reads it), and provisions each claim the
// scheduler has placed (volume.kubernetes.io/selected-node) as a PV in the
// zone of that node, with zonal node affinity, as the driver's external
// provisioner does. Released volumes are deleted under reclaim policy
// Delete. KWOK's fake kubelets mount nothing, so attachment is not required.
package ebscsi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	// Driver is the EBS CSI driver's name.
	Driver = "ebs.csi.aws.com"
	// StorageClassName is the default StorageClass installed.
	StorageClassName = "gp3"
	// selectedNode is the scheduler's annotation on a delayed-binding
	// claim naming the node its pod goes to.
	selectedNode  = "volume.kubernetes.io/selected-node"
	provisionedBy = "pv.kubernetes.io/provisioned-by"
)

// AttachLimit is how many EBS volumes a node of instanceType can attach,
// as the driver's node plugin publishes it in its CSINode: 39 for the Xen
// generations (their limit of 40 less the root volume), else the Nitro
// limit of 28 shared attachments less the root volume and the primary
// network interface (DescribeInstanceTypes' EbsInfo.MaximumEbsAttachments
// says 27 for m5.large: 28 less the primary ENI). Source: Amazon EC2 User
// Guide, "Amazon EBS volume limits for Amazon EC2 instances". A
// simplification: EC2 also counts further ENIs and NVMe instance store
// volumes against the shared Nitro limit (m5d.large: 26 before the root
// volume), and newer types (m7i, c7i, ...; AttachmentLimitType "dedicated")
// have a dedicated EBS limit of their own (32 for m7i.large), which the
// local cloud's catalog does not carry.
func AttachLimit(instanceType string) int32 {
	family, _, _ := strings.Cut(instanceType, ".")
	switch family {
	case "t2", "m4", "c4", "r4", "x1", "x1e", "d2", "h1", "i3", "p2", "p3", "g3":
		return 39
	}
	return 26
}

// Install creates the CSIDriver and the default StorageClass.
func Install(ctx context.Context, kc kubernetes.Interface) error {
	drv := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: Driver}, Spec: storagev1.CSIDriverSpec{
		AttachRequired: new(false), PodInfoOnMount: new(false), StorageCapacity: new(false),
	}}
	if _, err := kc.StorageV1().CSIDrivers().Create(ctx, drv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CSIDriver %s: %w", Driver, err)
	}
	wffc, del := storagev1.VolumeBindingWaitForFirstConsumer, corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: StorageClassName, Annotations: map[string]string{
			"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner: Driver, VolumeBindingMode: &wffc, ReclaimPolicy: &del, AllowVolumeExpansion: new(true),
		Parameters: map[string]string{"type": "gp3"},
	}
	if _, err := kc.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create StorageClass %s: %w", StorageClassName, err)
	}
	return nil
}

// Options tune the simulated driver; the zero value is the driver as EKS
// runs it.
type Options struct {
	// AttachLimit is the count a node's CSINode publishes (nil: the
	// AttachLimit of its instance type); a test sets a low one.
	AttachLimit func(*corev1.Node) int32
	// Nodes selects the nodes the driver's node plugin runs on (nil: all):
	// only those get a CSINode and volumes.
	Nodes func(*corev1.Node) bool
}

// Run provisions, limits and deletes volumes every period until ctx ends.
func Run(ctx context.Context, kc kubernetes.Interface, period time.Duration, logger *slog.Logger) {
	RunWith(ctx, kc, period, logger, Options{})
}

// RunWith is Run with options.
func RunWith(ctx context.Context, kc kubernetes.Interface, period time.Duration, logger *slog.Logger, o Options) {
	for ctx.Err() == nil {
		if err := ReconcileWith(ctx, kc, logger, o); err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "ebs csi simulation", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(period):
		}
	}
}

// Reconcile makes one pass: CSINodes for new nodes, PVs for placed
// claims, deletion of released volumes.
func Reconcile(ctx context.Context, kc kubernetes.Interface, logger *slog.Logger) error {
	return ReconcileWith(ctx, kc, logger, Options{})
}

// ReconcileWith is Reconcile with options.
func ReconcileWith(ctx context.Context, kc kubernetes.Interface, logger *slog.Logger, o Options) error {
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	byName := map[string]*corev1.Node{}
	var errs []error
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if o.Nodes != nil && !o.Nodes(n) {
			continue
		}
		byName[n.Name] = n
		errs = append(errs, ensureCSINode(ctx, kc, n, o.limit(n)))
	}
	errs = append(errs, provision(ctx, kc, byName, logger), deleteReleased(ctx, kc))
	return errors.Join(errs...)
}

func (o Options) limit(n *corev1.Node) int32 {
	if o.AttachLimit != nil {
		return o.AttachLimit(n)
	}
	return AttachLimit(n.Labels[corev1.LabelInstanceTypeStable])
}

func ensureCSINode(ctx context.Context, kc kubernetes.Interface, n *corev1.Node, limit int32) error {
	if _, err := kc.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return err
	}
	id := n.Spec.ProviderID[strings.LastIndex(n.Spec.ProviderID, "/")+1:]
	cn := &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
		Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
			Name: Driver, NodeID: id, TopologyKeys: []string{corev1.LabelTopologyZone},
			Allocatable: &storagev1.VolumeNodeResources{Count: new(limit)},
		}}},
	}
	if _, err := kc.StorageV1().CSINodes().Create(ctx, cn, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CSINode %s: %w", n.Name, err)
	}
	return nil
}

// provision creates a PV for every pending claim of this driver that the
// scheduler has placed, in its node's zone.
func provision(ctx context.Context, kc kubernetes.Interface, nodes map[string]*corev1.Node, logger *slog.Logger) error {
	pvcs, err := kc.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	var errs []error
	for i := range pvcs.Items {
		c := &pvcs.Items[i]
		node := nodes[c.Annotations[selectedNode]]
		if c.Spec.VolumeName != "" || c.Status.Phase != corev1.ClaimPending || node == nil || c.Spec.StorageClassName == nil {
			continue
		}
		sc, err := kc.StorageV1().StorageClasses().Get(ctx, *c.Spec.StorageClassName, metav1.GetOptions{})
		if err != nil || sc.Provisioner != Driver {
			continue
		}
		pv := volumeFor(c, sc, node.Labels[corev1.LabelTopologyZone])
		if _, err := kc.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			errs = append(errs, fmt.Errorf("create PV for %s/%s: %w", c.Namespace, c.Name, err))
			continue
		}
		logger.InfoContext(ctx, "volume provisioned", "claim", c.Namespace+"/"+c.Name, "volume", pv.Name, "zone", node.Labels[corev1.LabelTopologyZone])
	}
	return errors.Join(errs...)
}

func volumeFor(c *corev1.PersistentVolumeClaim, sc *storagev1.StorageClass, zone string) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if sc.ReclaimPolicy != nil {
		reclaim = *sc.ReclaimPolicy
	}
	name := "pvc-" + string(c.UID)
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{provisionedBy: Driver}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: c.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   c.Spec.AccessModes,
			StorageClassName:              sc.Name,
			PersistentVolumeReclaimPolicy: reclaim,
			VolumeMode:                    c.Spec.VolumeMode,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: Driver, VolumeHandle: "vol-" + strings.ReplaceAll(string(c.UID), "-", "")[:17], FSType: "ext4"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
	}
}

// deleteReleased deletes this driver's released volumes whose reclaim
// policy is Delete, as the external provisioner does.
func deleteReleased(ctx context.Context, kc kubernetes.Interface) error {
	pvs, err := kc.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	var errs []error
	for i := range pvs.Items {
		pv := &pvs.Items[i]
		if pv.Annotations[provisionedBy] != Driver || pv.Status.Phase != corev1.VolumeReleased ||
			pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
			continue
		}
		if err := kc.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete PV %s: %w", pv.Name, err))
		}
	}
	return errors.Join(errs...)
}
