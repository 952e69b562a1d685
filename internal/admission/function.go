package admission

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/settings"
)

// ProvisionNudger sends the webhook's hints to the provisioner's queue and
// counts the nudges it sends (nodewright_webhook_nudges_total by reason);
// Metrics may be nil.
type ProvisionNudger struct {
	Queue   *queue.Queue
	Metrics *metrics.Recorder
}

// Nudge implements admission.Nudger.
func (n ProvisionNudger) Nudge(ctx context.Context, hint Hint, delay time.Duration) error {
	err := n.Queue.Send(ctx, queue.Message{Kind: queue.KindProvision, Subject: hint.Namespace + "/" + hint.Name, Reason: hint.Reason}, delay)
	if err == nil {
		n.Metrics.Add(metrics.WebhookNudges, 1, metrics.Dimensions{"reason": hint.Reason})
	}
	return err
}

// WebhookHandler builds the webhook function's handler. It lives here, not in
// internal/app, so the webhook binary links no Kubernetes or EC2 client: it
// answers the apiserver in milliseconds, cold starts included. It builds no App: its role may only read its secret and send to the provision
// queue, so it never touches the cluster, EC2 or the table. The secret comes
// from Settings.WebhookSecret or, in AWS, Secrets Manager.
func WebhookHandler(ctx context.Context, s settings.Settings, cfg sdkaws.Config, log *slog.Logger, rec *metrics.Recorder) (*Handler, error) {
	if err := s.Require(settings.EnvProvisionQueueURL); err != nil {
		return nil, err
	}
	secrets := StaticSecret(s.WebhookSecret)
	if s.WebhookSecret == "" && s.WebhookSecretARN != "" {
		secrets = SecretsManagerSource(secretsmanager.NewFromConfig(cfg), s.WebhookSecretARN)
	}
	// Read once now: a role that cannot read its secret is a deployment
	// error better seen at init than as a webhook that turns every call away.
	if err := (&secretCache{source: secrets, now: time.Now}).read(ctx); err != nil {
		return nil, fmt.Errorf("read webhook secret: %w", err)
	}
	q := queue.New(sqs.NewFromConfig(cfg), s.ProvisionQueueURL)
	return NewHandler(Options{Secrets: secrets, Nudger: ProvisionNudger{Queue: q, Metrics: rec}, Coalesce: s.BatchIdle, Logger: log})
}
