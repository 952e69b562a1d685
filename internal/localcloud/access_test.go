package localcloud_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	authnv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/localcloud"
)

// The controllers' clients, by static token (tests) or by EKS token with
// the controllers' credentials (the demo, as in EKS), hold exactly
// access.ControllerClusterRole, and a refusal shows up in Forbidden: the
// check every integration package runs after its tests. Its own cloud, as
// the 403 it provokes would fail the shared one's package.
func TestControllersHoldExactlyTheirRole(t *testing.T) {
	c := localcloud.ForTest(t, localcloud.Options{ClusterName: "access", Components: localcloud.All})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	static, err := kubernetes.NewForConfig(c.ControllerREST)
	if err != nil {
		t.Fatal(err)
	}
	awsCfg := awsConfigFromEnv(t, c.ControllerEnv())
	viaEKS, err := kube.ForEKS(ctx, awsCfg, eks.NewFromConfig(awsCfg), c.ClusterName, kube.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	review, err := viaEKS.Clientset().AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if groups := review.Status.UserInfo.Groups; !slices.Contains(groups, access.ControllerGroup) || slices.Contains(groups, "system:masters") {
		t.Errorf("controller credentials authenticate with groups %v, want %s and not system:masters", groups, access.ControllerGroup)
	}
	for name, cs := range map[string]kubernetes.Interface{"static token": static, "EKS token": viaEKS.Clientset()} {
		if _, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
			t.Errorf("%s: list pods: %v", name, err)
		}
		if _, err := cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{Limit: 1}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: list secrets: want 403, got %v", name, err)
		}
		_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: access.ControllerGroup}}}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: bind cluster-admin: want 403, got %v", name, err)
		}
	}
	// A shadow-mode stack's identity reads what the controllers read and
	// no Secret; the refusal is in the audit log (Forbidden keeps a read
	// refused to it), its refused write is not.
	shadow, err := kubernetes.NewForConfig(c.ShadowREST)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shadow.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("shadow identity: list nodes: %v", err)
	}
	if _, err := shadow.CoreV1().Pods("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		t.Errorf("shadow identity: list pods: %v", err)
	}
	if _, err := shadow.CoreV1().Secrets("default").Get(ctx, "any", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("shadow identity: get secrets: want 403, got %v", err)
	}
	if err := shadow.CoreV1().Pods("default").Delete(ctx, "any", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("shadow identity: delete a pod: want 403, got %v", err)
	}
	denied, err := c.Forbidden()
	if err != nil {
		t.Fatal(err)
	}
	var secrets, shadowSecrets int
	for _, d := range denied {
		if strings.Contains(d, " list secrets default/") {
			secrets++
		}
		if strings.Contains(d, " get secrets default/any") {
			shadowSecrets++
		}
	}
	if secrets != 2 || shadowSecrets != 1 || len(denied) != 5 {
		t.Errorf("Forbidden() = %q, want the secrets list and the binding once per controller user, and the shadow identity's Secret read", denied)
	}
}
