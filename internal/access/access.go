// Package access defines the Kubernetes rights nodewright's functions hold,
// once, for everyone who needs them: the webhook registrar applies them to a
// real cluster, the CDK app maps the controller role's access entry to
// ControllerGroup, and the local control plane runs every function's client
// with exactly these rights (and nothing else) in tests and in the demo.
//
// The controllers (provisioner, lifecycle, interruption, disruption) get
// ControllerClusterRole: read what scheduling and draining look at, write
// Nodes, evict and delete Pods, record Events. Nothing on Secrets,
// ConfigMaps, workloads' specs, RBAC or webhooks.
//
// A shadow-mode stack's functions (the same role, -c mode=shadow) get
// ShadowClusterRole through ShadowGroup instead: the same reads of the
// cluster and nothing else, no write and no Secret. Shadow mode runs every
// controller's pass with writes replaced (internal/shadow), so it reads
// exactly what they read, less the Events they would have counted.
//
// The registrar keeps the EKS cluster-admin access policy: it creates these
// ClusterRoles and their bindings, and the API server lets only a holder of
// every right a role grants (or of the escalate and bind verbs, which make
// it cluster-admin in effect) create one. No EKS access policy narrower
// than cluster-admin can create RBAC objects.
package access

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Kubernetes groups the EKS access entries map the functions' roles to.
const (
	ControllerGroup = "nodewright:controller"
	ShadowGroup     = "nodewright:shadow"
	RegistrarGroup  = "nodewright:webhook-registrar"
)

// ControllerRoleName is the default name of the ClusterRole and its
// binding; a stack names its own (several stacks may share a cluster, and
// deleting one must not take the others' rights).
const ControllerRoleName = "nodewright-controller"

// ManagedByLabel marks objects nodewright manages; it never overwrites or
// deletes one without it.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "nodewright"
)

// ShadowRoleName is the default name of the shadow-mode ClusterRole and
// its binding; a stack names its own, as for the controllers'.
const ShadowRoleName = "nodewright-shadow"

var read = []string{"get", "list", "watch"}

// clusterReads are the reads of internal/kube's client: the cluster
// snapshot scheduling, disruption and draining work from (pods, nodes,
// namespaces' labels, PDBs, DaemonSets, and the volumes, claims, storage
// classes, CSINodes and attachments of volume topology and limits), a
// Node by name or label (NodeFor) and a PersistentVolumeClaim by name.
func clusterReads() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes", "namespaces", "persistentvolumes", "persistentvolumeclaims"}, Verbs: read},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: read},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: read},
		{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses", "csinodes", "volumeattachments"}, Verbs: read},
	}
}

// ControllerClusterRole is every right the controllers use, and no other.
func ControllerClusterRole(name string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: meta(name),
		Rules: append(clusterReads(), []rbacv1.PolicyRule{
			// Registration (labels, taints), cordon, and removal of nodes.
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch", "update", "delete"}},
			// The drain: evictions respect PDBs; delete is only for pods
			// left when the claim's terminationGracePeriod has run out and
			// for pods of an instance that is gone.
			{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}},
			// Events: repeated ones are counted by update/patch.
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		}...),
	}
}

// ControllerClusterRoleBinding binds the ClusterRole name to ControllerGroup.
func ControllerClusterRoleBinding(name string) *rbacv1.ClusterRoleBinding {
	return binding(name, ControllerGroup)
}

// ShadowClusterRole is shadow mode's rights: the controllers' reads of the
// cluster and nothing else. No write (internal/shadow makes none, and RBAC
// refuses one it missed), no Events (shadow mode writes none, so it never
// reads one back to count a repeat), no Secrets, ConfigMaps or anything a
// controller does not read. EKS's access policies offer no such view:
// AmazonEKSAdminViewPolicy reads every resource, Secrets included, and
// AmazonEKSViewPolicy, which excludes Secrets, cannot list Nodes,
// PersistentVolumes, StorageClasses, CSINodes or VolumeAttachments, which
// the snapshot needs (EKS user guide, "Review access policy permissions").
func ShadowClusterRole(name string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{ObjectMeta: meta(name), Rules: clusterReads()}
}

// ShadowClusterRoleBinding binds the ClusterRole name to ShadowGroup.
func ShadowClusterRoleBinding(name string) *rbacv1.ClusterRoleBinding {
	return binding(name, ShadowGroup)
}

// binding binds the ClusterRole name to group, under the same name.
func binding(name, group string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: meta(name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group}},
	}
}

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedByValue}}
}
