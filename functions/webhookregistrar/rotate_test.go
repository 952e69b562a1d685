package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/settings"
)

// The rotation schedule gives the webhook a new secret and re-registers the
// URL with it: the webhook accepts the new value and the one before it (the
// apiserver may still call with that), not older ones; a registration left
// behind by a half-done rotation is repaired before rotating again.
func TestRotationKeepsTheWebhookReachable(t *testing.T) {
	sim, err := awssim.New(awssim.Options{Region: "eu-west-1", ClusterName: "rotate", KubernetesVersion: "1.36"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ctx := context.Background()
	cfg := sdkaws.Config{Region: "eu-west-1", BaseEndpoint: sdkaws.String(sim.URL()), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(awssim.DefaultAccessKeyID, awssim.DefaultSecretAccessKey, "")}
	sm := secretsmanager.NewFromConfig(cfg)
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: sdkaws.String("webhook"), SecretString: sdkaws.String("firstValue0123456789")})
	if err != nil {
		t.Fatal(err)
	}
	arn := sdkaws.ToString(created.ARN)
	p := props()
	p[propSecretArn] = arn
	kc := fake.NewSimpleClientset()
	r := trustedRegistrar(kc)
	r.trust[webhookResourceType][propSecretArn] = arn
	r.secrets, r.putSecret = secretsManagerValue(sm), secretsManagerPut(sm)
	if _, _, err := r.serve(ctx, cfn.Event{RequestType: cfn.RequestCreate, ResourceType: webhookResourceType, ResourceProperties: p}); err != nil {
		t.Fatal(err)
	}
	registered := func() string {
		c, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "nodewright-prod-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return *c.Webhooks[0].ClientConfig.URL
	}
	accepts := func(u string) bool {
		h, err := admission.WebhookHandler(ctx, settings.Settings{WebhookSecretARN: arn, ProvisionQueueURL: sim.URL() + "/queue/none"}, cfg, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		parsed, _ := url.Parse(u)
		resp := h.Serve(ctx, admission.Request{Method: http.MethodPost, Path: parsed.EscapedPath(), Body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1"}}`)})
		return resp.Status == http.StatusOK
	}
	first := registered()
	if !strings.HasSuffix(first, "/firstValue0123456789") {
		t.Fatalf("registered %s", first)
	}
	if err := r.rotate(ctx); err != nil {
		t.Fatalf("rotate: %v", err)
	}
	second := registered()
	if second == first || !accepts(second) || !accepts(first) {
		t.Fatalf("after one rotation: new URL accepted %v, previous accepted %v (want both; URL changed %v)", accepts(second), accepts(first), second != first)
	}
	if err := r.rotate(ctx); err != nil {
		t.Fatalf("rotate again: %v", err)
	}
	third := registered()
	if !accepts(third) || !accepts(second) || accepts(first) {
		t.Fatalf("after two rotations: current %v, previous %v, first %v; want true, true, false", accepts(third), accepts(second), accepts(first))
	}

	// A registration left on the previous value: repaired to the current
	// one, and the secret is not rotated this time.
	c, _ := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "nodewright-prod-1", metav1.GetOptions{})
	c.Webhooks[0].ClientConfig.URL = &second
	if _, err := kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.rotate(ctx); err != nil {
		t.Fatal(err)
	}
	if got := registered(); got != third {
		t.Errorf("repair registered %s, want the current value's %s", got, third)
	}
	if !isRotation([]byte(`{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)) || isRotation([]byte(`{"RequestType":"Create"}`)) {
		t.Error("isRotation tells the schedule from custom resource events wrongly")
	}
}
