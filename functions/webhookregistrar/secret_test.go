package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/settings"
)

// The URL the registrar registers must authenticate with the webhook that
// reads the same secret, whatever the secret's value looks like: a value
// with a trailing newline (set by hand or by a rotation function) used to
// be escaped into the URL by one side and trimmed by the other, and the
// webhook silently answered every call with 401.
func TestRegisteredURLAuthenticatesWithTheWebhook(t *testing.T) {
	sim, err := awssim.New(awssim.Options{Region: "us-west-2", ClusterName: "secrets", KubernetesVersion: "1.36"})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	ctx := context.Background()
	cfg := sdkaws.Config{Region: "us-west-2", BaseEndpoint: sdkaws.String(sim.URL()), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(awssim.DefaultAccessKeyID, awssim.DefaultSecretAccessKey, "")}
	sm := secretsmanager.NewFromConfig(cfg)
	for _, value := range []string{"plainSecret0123", "trailingNewline0123\n", " spaced0123 \r\n"} {
		created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: sdkaws.String(url.PathEscape(value)), SecretString: sdkaws.String(value)})
		if err != nil {
			t.Fatal(err)
		}
		arn := sdkaws.ToString(created.ARN)
		secret, err := secretsManagerValue(sm)(ctx, arn)
		if err != nil {
			t.Fatal(err)
		}
		w := webhookProps{name: "nodewright-test", functionURL: "https://abc.lambda-url.us-west-2.on.aws/", pathPrefix: "admit", secretArn: arn}
		registered, err := url.Parse(*desiredConfiguration(w, secret).Webhooks[0].ClientConfig.URL)
		if err != nil {
			t.Fatal(err)
		}
		h, err := admission.WebhookHandler(ctx, settings.Settings{WebhookSecretARN: arn, ProvisionQueueURL: sim.URL() + "/queue/none"}, cfg,
			slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		// Function URLs hand over the path as sent; other front ends decode it.
		for _, path := range []string{registered.EscapedPath(), registered.Path} {
			resp := h.Serve(ctx, admission.Request{Method: http.MethodPost, Path: path, Body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1"}}`)})
			if resp.Status != http.StatusOK {
				t.Errorf("secret %q registered as %s: webhook answered %d", value, path, resp.Status)
			}
		}
	}
}
