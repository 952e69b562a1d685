package main

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
	"github.com/nodewright/nodewright/internal/settings"
)

// shadowUser authenticates as a shadow-mode stack's controller role does
// through its access entry: in access.ShadowGroup and nothing else.
const shadowUser = "nodewright-shadow-it"

// shadowAccess: a shadow-mode stack's access resource binds access.ShadowGroup
// to the read-only ClusterRole, and the API server gives that identity the
// reads shadow mode makes and refuses it a Secret (the audit log records
// the refusal) and every write. Its Delete removes the objects and leaves
// the Nodes' finalizers alone.
func shadowAccess(t *testing.T, ctx context.Context, r *registrar, plane *kubeplane.Plane, cluster string) {
	const name = "nodewright-shadow-stack"
	p := map[string]interface{}{propClusterName: cluster, propAccessName: name, propAccessMode: settings.ModeShadow}
	ev := func(typ cfn.RequestType) cfn.Event {
		return cfn.Event{RequestType: typ, ResourceType: accessResourceType, PhysicalResourceID: name, ResourceProperties: p}
	}
	if id, _, err := r.handle(ctx, ev(cfn.RequestCreate)); err != nil || id != name {
		t.Fatalf("create: %q %v", id, err)
	}
	rbac := plane.Client().RbacV1()
	role, err := rbac.ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	if err != nil || !reflect.DeepEqual(role.Rules, access.ShadowClusterRole(name).Rules) {
		t.Fatalf("ClusterRole %s = %+v (%v), want access.ShadowClusterRole", name, role, err)
	}
	binding, err := rbac.ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	if err != nil || len(binding.Subjects) != 1 || binding.Subjects[0].Name != access.ShadowGroup || binding.RoleRef.Name != name {
		t.Fatalf("ClusterRoleBinding %s = %+v (%v), want %s bound to it", name, binding, err, access.ShadowGroup)
	}

	cfg, err := plane.UserRESTConfig(shadowUser)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ns := plane.NewNamespace(t)
	admin := plane.Client().CoreV1()
	if _, err := admin.Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-password"}, StringData: map[string]string{"p": "x"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("shadow identity: list nodes: %v", err)
	}
	if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("shadow identity: list pods: %v", err)
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("shadow identity: list PDBs: %v", err)
	}
	if _, err := cs.CoreV1().Secrets(ns).Get(ctx, "db-password", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("shadow identity: get secrets: want 403, got %v", err)
	}
	_, listErr := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{})
	_, cmErr := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	_, patchErr := cs.CoreV1().Nodes().Patch(ctx, "any-node", types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	evictErr := cs.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "any-pod", Namespace: ns}})
	_, eventErr := cs.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}, InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: "n"}}, metav1.CreateOptions{})
	for what, err := range map[string]error{"list secrets": listErr, "list configmaps": cmErr, "patch a node": patchErr, "evict a pod": evictErr, "create an event": eventErr} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("shadow identity: %s: want 403, got %v", what, err)
		}
	}
	denied, err := plane.Forbidden()
	if err != nil {
		t.Fatal(err)
	}
	if want := shadowUser + " get secrets " + ns + "/db-password"; !slices.Contains(denied, want) {
		t.Errorf("the audit log does not show the refused Secret read %q: %q", want, denied)
	}
	for _, d := range denied {
		if strings.HasPrefix(d, shadowUser+" ") && (strings.Contains(d, " nodes ") || strings.Contains(d, " pods ")) && !strings.Contains(d, " patch ") && !strings.Contains(d, "eviction") {
			t.Errorf("a read shadow mode makes was refused: %s", d)
		}
	}

	// Delete: the objects go; a shadow-mode stack added no finalizer, so
	// none is released (the claims are not even read).
	r.claims = func(context.Context, string) ([]*apis.NodeClaim, error) {
		t.Error("a shadow-mode Delete read the claims to release finalizers")
		return nil, nil
	}
	defer func() { r.claims = nil }()
	p[propTableName] = "claims"
	if _, _, err := r.handle(ctx, ev(cfn.RequestDelete)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := rbac.ClusterRoles().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole after delete: %v", err)
	}
	if _, err := rbac.ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRoleBinding after delete: %v", err)
	}
}
