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
// The registrar keeps the EKS cluster-admin access policy: it creates this
// ClusterRole and its binding, and the API server lets only a holder of
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

var read = []string{"get", "list", "watch"}

// ControllerClusterRole is every right the controllers use, and no other.
func ControllerClusterRole(name string) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: meta(name),
		Rules: []rbacv1.PolicyRule{
			// The cluster snapshot scheduling and draining work from.
			{APIGroups: []string{""}, Resources: []string{"pods", "nodes", "namespaces", "persistentvolumes", "persistentvolumeclaims"}, Verbs: read},
			{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: read},
			{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: read},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses", "csinodes", "volumeattachments"}, Verbs: read},
			// Registration (labels, taints), cordon, and removal of nodes.
			{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"patch", "update", "delete"}},
			// The drain: evictions respect PDBs; delete is only for pods
			// left when the claim's terminationGracePeriod has run out and
			// for pods of an instance that is gone.
			{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}},
			// Events: repeated ones are counted by update/patch.
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"get", "list", "create", "update", "patch"}},
		},
	}
}

// ControllerClusterRoleBinding binds the ClusterRole name to ControllerGroup.
func ControllerClusterRoleBinding(name string) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: meta(name),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: ControllerGroup}},
	}
}

func meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedByValue}}
}
