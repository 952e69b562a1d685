package main

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	admv1 "k8s.io/api/admission/v1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// The custom resource end to end on a real kube-apiserver: the registrar
// finds the cluster through (simulated) EKS, authenticates with an EKS token
// checked by the simulator's TokenReview webhook, and the API server itself
// validates the configuration, CEL match conditions included.
func TestRegistrarOnRealAPIServer(t *testing.T) {
	localcloud.SkipIfShort(t)
	const cluster = "registrar-it"
	sim, err := awssim.New(awssim.Options{ClusterName: cluster, KubernetesVersion: "1.36"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	startCtx, cancel := context.WithTimeout(context.Background(), 30*time.Minute) // a cold control-plane build
	defer cancel()
	plane, err := kubeplane.Start(startCtx, kubeplane.Options{TokenWebhookURL: sim.TokenReviewURL(),
		Users: []kubeplane.User{{Name: shadowUser, Groups: []string{access.ShadowGroup}}}, AuditGroups: []string{access.ShadowGroup}})
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	defer func() {
		if err := plane.Close(); err != nil {
			t.Errorf("close control plane: %v", err)
		}
	}()
	sim.SetEKSCluster(plane.Endpoint, plane.CAData, "1.36")

	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL_STS": sim.URL(), "AWS_ENDPOINT_URL_EKS": sim.URL(), "AWS_REGION": "us-west-2",
		"AWS_ACCESS_KEY_ID": awssim.DefaultAccessKeyID, "AWS_SECRET_ACCESS_KEY": awssim.DefaultSecretAccessKey,
		"AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	ctx, cancelRun := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelRun()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := &registrar{
		log:     slog.New(slog.DiscardHandler),
		cluster: eksClusterClients(awsCfg, eks.NewFromConfig(awsCfg)),
		secrets: func(context.Context, string) (string, error) { return testSecret, nil },
	}
	p := props()
	p[propClusterName] = cluster
	admin := plane.Client().AdmissionregistrationV1().ValidatingWebhookConfigurations()

	id, _, err := r.handle(ctx, cfn.Event{RequestType: cfn.RequestCreate, RequestID: "create-1", ResourceProperties: p})
	if err != nil {
		t.Fatalf("create: %v (token reviews: %d)", err, len(sim.Calls("tokenreview", "")))
	}
	got, err := admin.Get(ctx, id, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("configuration not in the cluster: %v", err)
	}
	wh := got.Webhooks[0]
	if len(wh.MatchConditions) != 2 || *wh.FailurePolicy != admissionv1.Ignore || *wh.TimeoutSeconds != 2 ||
		!strings.HasSuffix(*wh.ClientConfig.URL, "/admit/"+testSecret) {
		t.Errorf("stored configuration = %+v", wh)
	}
	if n := len(sim.Calls("tokenreview", "TokenReview")); n == 0 {
		t.Error("the API server saw no EKS token: the registrar did not authenticate through EKS")
	}

	// An update (new CA bundle) replaces the object in place.
	p[propCABundle] = ""
	if _, _, err := r.handle(ctx, cfn.Event{RequestType: cfn.RequestUpdate, PhysicalResourceID: id, ResourceProperties: p}); err != nil {
		t.Fatalf("update: %v", err)
	}
	if got, err := admin.Get(ctx, id, metav1.GetOptions{}); err != nil || len(got.Webhooks[0].ClientConfig.CABundle) != 0 {
		t.Fatalf("after update: %v, caBundle %q", err, got.Webhooks[0].ClientConfig.CABundle)
	}

	if _, _, err := r.handle(ctx, cfn.Event{RequestType: cfn.RequestDelete, PhysicalResourceID: id, ResourceProperties: p}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := admin.Get(ctx, id, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("configuration still present after delete: %v", err)
	}

	t.Run("controller RBAC per stack", func(t *testing.T) {
		controllerAccess(t, ctx, r, plane, cluster)
	})

	t.Run("shadow mode's RBAC reads without Secrets", func(t *testing.T) {
		shadowAccess(t, ctx, r, plane, cluster)
	})

	t.Run("delete releases nodewright's node finalizers only", func(t *testing.T) {
		releasesFinalizers(t, ctx, r, plane, cluster)
	})

	t.Run("API server calls the endpoint only for Unschedulable pods", func(t *testing.T) {
		matchConditionsFilter(t, ctx, r, plane, cluster)
	})

	// A stack deleted after its cluster: nothing to remove, no failure.
	p[propClusterName] = "deleted-cluster"
	if _, _, err := r.handle(ctx, cfn.Event{RequestType: cfn.RequestDelete, PhysicalResourceID: id, ResourceProperties: p}); err != nil {
		t.Fatalf("delete for a missing cluster: %v", err)
	}
}

// matchConditionsFilter registers the configuration against a local HTTPS
// endpoint and checks, with the real scheduler and API server, that only the
// scheduler's Unschedulable status update reaches it.
func matchConditionsFilter(t *testing.T, ctx context.Context, r *registrar, plane *kubeplane.Plane, cluster string) {
	type call struct{ op, sub, pod, path string }
	var mu sync.Mutex
	var calls []call
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var review admv1.AdmissionReview
		if err := json.NewDecoder(req.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls = append(calls, call{string(review.Request.Operation), review.Request.SubResource, review.Request.Name, req.URL.Path})
		mu.Unlock()
		review.Response = &admv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	p := props()
	p[propClusterName] = cluster
	p[propWebhookName] = "nodewright-filter-test"
	p[propFunctionURL] = srv.URL + "/"
	p[propCABundle] = string(ca)
	if _, _, err := r.handle(ctx, cfn.Event{RequestType: cfn.RequestCreate, ResourceProperties: p}); err != nil {
		t.Fatalf("register: %v", err)
	}
	defer func() {
		if _, _, err := r.handle(context.Background(), cfn.Event{RequestType: cfn.RequestDelete, PhysicalResourceID: "nodewright-filter-test", ResourceProperties: p}); err != nil {
			t.Errorf("unregister: %v", err)
		}
	}()

	cs := plane.Client()
	ns := plane.NewNamespace(t)
	pod := kubeplane.UnschedulablePod(ns, "pending")
	// The webhook configuration is read by the API server asynchronously:
	// retry the observable step until a call arrives.
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) > 0, nil
	})
	if err != nil {
		t.Fatalf("no AdmissionReview for an Unschedulable pod within 60 s")
	}
	// A status update that is not the scheduler's Unschedulable verdict on
	// an unbound pod does not reach the endpoint: a pod whose only
	// condition is Ready=False.
	other := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector:    map[string]string{"nodewright.io/test": "no-such-node"},
			SchedulingGates: []corev1.PodSchedulingGate{{Name: "nodewright.io/hold"}},
			Containers:      []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	other, err = cs.CoreV1().Pods(ns).Create(ctx, other, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	other.Status.Conditions = append(other.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "Testing"})
	if _, err := cs.CoreV1().Pods(ns).UpdateStatus(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)

	mu.Lock()
	defer mu.Unlock()
	for _, c := range calls {
		if c.op != "UPDATE" || c.sub != "status" || c.pod != "pending" {
			t.Errorf("unexpected webhook call %+v: the match conditions let it through", c)
		}
		if c.path != "/admit/"+testSecret {
			t.Errorf("called on path %q, want the secret path", c.path)
		}
	}
}

// controllerAccess: the access resource applies the controllers' ClusterRole
// and binding under its stack's name; deleting one stack's leaves another's
// alone, and a foreign object of the same name is never overwritten.
func controllerAccess(t *testing.T, ctx context.Context, r *registrar, plane *kubeplane.Plane, cluster string) {
	rbac := plane.Client().RbacV1()
	exists := func(name string) bool {
		role, errRole := rbac.ClusterRoles().Get(ctx, name, metav1.GetOptions{})
		_, errBinding := rbac.ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
		return errRole == nil && errBinding == nil && len(role.Rules) > 0
	}
	ev := func(typ cfn.RequestType, name string) cfn.Event {
		return cfn.Event{RequestType: typ, ResourceType: accessResourceType, PhysicalResourceID: name,
			ResourceProperties: map[string]interface{}{propClusterName: cluster, propAccessName: name}}
	}
	for _, name := range []string{"nodewright-controller-a", "nodewright-controller-b"} {
		if id, _, err := r.handle(ctx, ev(cfn.RequestCreate, name)); err != nil || id != name {
			t.Fatalf("create %s: %q %v", name, id, err)
		}
	}
	if _, _, err := r.handle(ctx, ev(cfn.RequestUpdate, "nodewright-controller-a")); err != nil {
		t.Fatalf("update: %v", err)
	}
	if _, _, err := r.handle(ctx, ev(cfn.RequestDelete, "nodewright-controller-a")); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if exists("nodewright-controller-a") || !exists("nodewright-controller-b") {
		t.Errorf("after deleting stack a: a present %v, b present %v; want only b", exists("nodewright-controller-a"), exists("nodewright-controller-b"))
	}
	if _, _, err := r.handle(ctx, ev(cfn.RequestDelete, "nodewright-controller-b")); err != nil {
		t.Fatalf("delete b: %v", err)
	}
	foreign := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nodewright-controller-foreign"}}
	if _, err := rbac.ClusterRoles().Create(ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.handle(ctx, ev(cfn.RequestCreate, foreign.Name)); err == nil || !strings.Contains(err.Error(), "not managed by nodewright") {
		t.Errorf("create over a foreign ClusterRole: %v", err)
	}
	if _, _, err := r.handle(ctx, ev(cfn.RequestDelete, foreign.Name)); err != nil {
		t.Fatalf("delete over a foreign ClusterRole: %v", err)
	}
	if _, err := rbac.ClusterRoles().Get(ctx, foreign.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("the foreign ClusterRole was removed: %v", err)
	}
}
