package admission

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/nodewright/nodewright/internal/localcloud/awssim"
)

// secretsManager starts the simulator and returns a Secrets Manager client
// on the real wire.
func secretsManager(t *testing.T) (*awssim.Server, *secretsmanager.Client) {
	t.Helper()
	sim, err := awssim.New(awssim.Options{Region: "us-west-2", ClusterName: "secrets", KubernetesVersion: "1.36"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	return sim, secretsmanager.NewFromConfig(sdkaws.Config{
		Region:           "us-west-2",
		Credentials:      credentials.NewStaticCredentialsProvider(awssim.DefaultAccessKeyID, awssim.DefaultSecretAccessKey, ""),
		BaseEndpoint:     sdkaws.String(sim.URL()),
		RetryMaxAttempts: 1,
	})
}

// A rotated secret is picked up by a warm webhook, and the previous one,
// still in the registered URL until the registrar re-registers, keeps
// working: a rotation must never silently switch the webhook off. A flood
// of wrong guesses costs at most one Secrets Manager read per window.
func TestRotatedSecretNeedsNoColdStart(t *testing.T) {
	sim, sm := secretsManager(t)
	ctx := context.Background()
	created, err := sm.CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: sdkaws.String("webhook"), SecretString: sdkaws.String("first-secret\n")})
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Unix(1_800_000_000, 0)}
	h, err := NewHandler(Options{Secrets: SecretsManagerSource(sm, sdkaws.ToString(created.ARN)),
		Nudger: &recordingNudger{}, Now: clock.now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	status := func(secret string) int {
		return h.Serve(ctx, Request{Method: http.MethodPost, Path: "/admit/" + SecretPathSegment(secret), Body: []byte(reviewJSON("UPDATE", "status", "uid-1", "", "Unschedulable"))}).Status
	}
	if got := status("first-secret"); got != http.StatusOK {
		t.Fatalf("current secret: %d", got)
	}
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN, SecretString: sdkaws.String("second-secret")}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(11 * time.Second)
	if got := status("second-secret"); got != http.StatusOK {
		t.Errorf("rotated secret, warm handler: %d, want 200", got)
	}
	if got := status("first-secret"); got != http.StatusOK {
		t.Errorf("previous secret (still registered) after rotation: %d, want 200", got)
	}
	if _, err := sm.PutSecretValue(ctx, &secretsmanager.PutSecretValueInput{SecretId: created.ARN, SecretString: sdkaws.String("third-secret")}); err != nil {
		t.Fatal(err)
	}
	clock.t = clock.t.Add(time.Minute)
	if got := status("first-secret"); got != http.StatusUnauthorized {
		t.Errorf("secret two rotations old: %d, want 401", got)
	}
	before := len(sim.Calls("secretsmanager", "GetSecretValue"))
	for range 200 {
		status("guess")
	}
	if n := len(sim.Calls("secretsmanager", "GetSecretValue")) - before; n > 0 {
		t.Errorf("200 wrong guesses within the refresh window read the secret %d times", n)
	}
}
