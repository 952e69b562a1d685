package main

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/settings"
)

const testSecret = "s3cr3tvalue0123456789"

func testRegistrar(kc kubernetes.Interface, clusterFound bool) *registrar {
	return &registrar{
		log: slog.New(slog.DiscardHandler),
		cluster: func(ctx context.Context, name string) (kubernetes.Interface, bool, error) {
			if !clusterFound {
				return nil, false, nil
			}
			return kc, true, nil
		},
		secrets: func(ctx context.Context, arn string) (string, error) { return testSecret, nil },
	}
}

func props() map[string]interface{} {
	return map[string]interface{}{
		propClusterName: "prod-1",
		propWebhookName: "nodewright-prod-1",
		propFunctionURL: "https://abc123.lambda-url.eu-west-1.on.aws/",
		propPathPrefix:  "/admit/",
		propSecretArn:   "arn:aws:secretsmanager:eu-west-1:111122223333:secret:nw-AbCd",
		propCABundle:    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
		"ServiceToken":  "arn:aws:lambda:eu-west-1:111122223333:function:reg",
	}
}

func TestCreateRegistersConfiguration(t *testing.T) {
	kc := fake.NewSimpleClientset()
	r := testRegistrar(kc, true)
	id, _, err := r.handle(context.Background(), cfn.Event{RequestType: cfn.RequestCreate, RequestID: "req-1", ResourceProperties: props()})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if id != "nodewright-prod-1" {
		t.Fatalf("physical id = %q, want the configuration name", id)
	}
	got, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(context.Background(), id, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if len(got.Webhooks) != 1 {
		t.Fatalf("webhooks = %d, want 1", len(got.Webhooks))
	}
	wh := got.Webhooks[0]
	if *wh.FailurePolicy != admissionv1.Ignore || *wh.TimeoutSeconds != 2 || *wh.SideEffects != admissionv1.SideEffectClassNoneOnDryRun {
		t.Errorf("failurePolicy/timeout/sideEffects = %v/%v/%v", *wh.FailurePolicy, *wh.TimeoutSeconds, *wh.SideEffects)
	}
	if want := "https://abc123.lambda-url.eu-west-1.on.aws/admit/" + testSecret; wh.ClientConfig.URL == nil || *wh.ClientConfig.URL != want {
		t.Errorf("url = %v, want %s", wh.ClientConfig.URL, want)
	}
	if wh.ClientConfig.Service != nil {
		t.Error("service reference set: nothing runs in the cluster")
	}
	if !strings.Contains(string(wh.ClientConfig.CABundle), "BEGIN CERTIFICATE") {
		t.Errorf("caBundle = %q", wh.ClientConfig.CABundle)
	}
	if len(wh.Rules) != 1 || len(wh.Rules[0].Operations) != 1 || wh.Rules[0].Operations[0] != admissionv1.Update ||
		strings.Join(wh.Rules[0].Resources, ",") != "pods/status" || strings.Join(wh.Rules[0].APIGroups, ",") != "" {
		t.Errorf("rules = %+v, want UPDATE on core pods/status only", wh.Rules)
	}
	var exprs []string
	for _, mc := range wh.MatchConditions {
		exprs = append(exprs, mc.Expression)
	}
	if all := strings.Join(exprs, " "); !strings.Contains(all, "'Unschedulable'") || !strings.Contains(all, "'PodScheduled'") {
		t.Errorf("matchConditions do not select Unschedulable pods: %v", exprs)
	}
	if got.Labels[managedByLabel] != managedByValue {
		t.Errorf("labels = %v", got.Labels)
	}
}

func TestUpdateIsIdempotentAndRefusesForeignObjects(t *testing.T) {
	kc := fake.NewSimpleClientset()
	r := testRegistrar(kc, true)
	ctx := context.Background()
	for _, rt := range []cfn.RequestType{cfn.RequestCreate, cfn.RequestUpdate, cfn.RequestUpdate} {
		if _, _, err := r.handle(ctx, cfn.Event{RequestType: rt, PhysicalResourceID: "nodewright-prod-1", ResourceProperties: props()}); err != nil {
			t.Fatalf("%s: %v", rt, err)
		}
	}
	list, _ := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if len(list.Items) != 1 {
		t.Fatalf("configurations = %d, want 1", len(list.Items))
	}

	foreign := fake.NewSimpleClientset(&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "nodewright-prod-1"}})
	_, _, err := testRegistrar(foreign, true).handle(ctx, cfn.Event{RequestType: cfn.RequestCreate, ResourceProperties: props()})
	if err == nil || !strings.Contains(err.Error(), "not managed by nodewright") {
		t.Fatalf("overwrote a foreign configuration, err = %v", err)
	}
}

func TestDelete(t *testing.T) {
	ctx := context.Background()
	kc := fake.NewSimpleClientset()
	r := testRegistrar(kc, true)
	if _, _, err := r.handle(ctx, cfn.Event{RequestType: cfn.RequestCreate, ResourceProperties: props()}); err != nil {
		t.Fatal(err)
	}
	del := cfn.Event{RequestType: cfn.RequestDelete, PhysicalResourceID: "nodewright-prod-1", ResourceProperties: props()}
	if _, _, err := r.handle(ctx, del); err != nil {
		t.Fatalf("delete: %v", err)
	}
	list, _ := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if len(list.Items) != 0 {
		t.Fatalf("configuration still present after delete")
	}
	// Deleting again (CloudFormation retries) succeeds.
	if _, _, err := r.handle(ctx, del); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	// A cluster that is gone has nothing left to remove.
	if _, _, err := testRegistrar(nil, false).handle(ctx, del); err != nil {
		t.Fatalf("delete with cluster gone: %v", err)
	}
	// A failed create's fallback physical ID (not a valid name) is a no-op.
	if _, _, err := testRegistrar(nil, true).handle(ctx, cfn.Event{RequestType: cfn.RequestDelete, PhysicalResourceID: "2024/01/01/[$LATEST]abc", ResourceProperties: props()}); err != nil {
		t.Fatalf("delete of unnamed: %v", err)
	}
	// Someone else's object with the same name is left alone.
	foreign := fake.NewSimpleClientset(&admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "nodewright-prod-1"}})
	if _, _, err := testRegistrar(foreign, true).handle(ctx, del); err != nil {
		t.Fatal(err)
	}
	if _, err := foreign.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "nodewright-prod-1", metav1.GetOptions{}); err != nil {
		t.Fatalf("foreign configuration deleted: %v", err)
	}
}

func TestBadProperties(t *testing.T) {
	for name, mutate := range map[string]func(map[string]interface{}){
		"missing cluster": func(p map[string]interface{}) { delete(p, propClusterName) },
		"bad name":        func(p map[string]interface{}) { p[propWebhookName] = "Not_A_Name" },
		"http url":        func(p map[string]interface{}) { p[propFunctionURL] = "http://example.com/" },
		"non-string":      func(p map[string]interface{}) { p[propSecretArn] = 3.0 },
	} {
		t.Run(name, func(t *testing.T) {
			p := props()
			mutate(p)
			kc := fake.NewSimpleClientset()
			if _, _, err := testRegistrar(kc, true).handle(context.Background(), cfn.Event{RequestType: cfn.RequestCreate, ResourceProperties: p}); err == nil {
				t.Fatal("accepted bad properties")
			}
			if len(kc.Actions()) != 0 {
				t.Errorf("touched the cluster with bad properties: %v", kc.Actions())
			}
		})
	}
}

func TestNotFoundClusterIsNotAnError(t *testing.T) {
	clients := eksClusterClients(aws.Config{Region: "eu-west-1"}, notFound{})
	kc, found, err := clients(context.Background(), "gone")
	if err != nil || found || kc != nil {
		t.Fatalf("clients(gone) = %v, %v, %v; want not found without error", kc, found, err)
	}
}

type notFound struct{}

func (notFound) DescribeCluster(ctx context.Context, in *eks.DescribeClusterInput, _ ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	return nil, &ekstypes.ResourceNotFoundException{Message: aws.String("No cluster found for name: gone.")}
}

// The access resource's Mode picks the rights it applies: the controllers'
// when absent or normal, the read-only shadow ClusterRole bound to
// access.ShadowGroup for shadow; anything else is refused before the
// cluster is touched.
func TestAccessMode(t *testing.T) {
	for mode, want := range map[string]string{"": access.ControllerGroup, settings.ModeNormal: access.ControllerGroup, settings.ModeShadow: access.ShadowGroup} {
		kc := fake.NewSimpleClientset()
		p := map[string]interface{}{propClusterName: "prod-1", propAccessName: "nodewright-x"}
		if mode != "" {
			p[propAccessMode] = mode
		}
		if _, _, err := testRegistrar(kc, true).handle(t.Context(), cfn.Event{RequestType: cfn.RequestCreate, ResourceType: accessResourceType, ResourceProperties: p}); err != nil {
			t.Fatalf("mode %q: %v", mode, err)
		}
		b, err := kc.RbacV1().ClusterRoleBindings().Get(t.Context(), "nodewright-x", metav1.GetOptions{})
		if err != nil || len(b.Subjects) != 1 || b.Subjects[0].Name != want {
			t.Errorf("mode %q: binding %+v %v, want group %s", mode, b, err, want)
		}
		role, err := kc.RbacV1().ClusterRoles().Get(t.Context(), "nodewright-x", metav1.GetOptions{})
		wantRole := access.ControllerClusterRole("nodewright-x")
		if mode == settings.ModeShadow {
			wantRole = access.ShadowClusterRole("nodewright-x")
		}
		if err != nil || !reflect.DeepEqual(role.Rules, wantRole.Rules) {
			t.Errorf("mode %q: ClusterRole rules %+v %v", mode, role, err)
		}
	}
	kc := fake.NewSimpleClientset()
	p := map[string]interface{}{propClusterName: "prod-1", propAccessName: "nodewright-x", propAccessMode: "dry-run"}
	if _, _, err := testRegistrar(kc, true).handle(t.Context(), cfn.Event{RequestType: cfn.RequestCreate, ResourceType: accessResourceType, ResourceProperties: p}); err == nil || len(kc.Actions()) != 0 {
		t.Errorf("mode dry-run: %v, actions %v", err, kc.Actions())
	}
}
