// Command webhookregistrar is the CloudFormation custom resource behind the
// CDK stack's Custom::NodewrightWebhook: it puts nodewright's one and only
// in-cluster object, a ValidatingWebhookConfiguration that forwards
// Unschedulable pod status updates to the webhook function, into the cluster
// on create/update and removes it on delete. The same function applies the
// controllers' RBAC (Custom::NodewrightAccess), whose delete also releases
// the termination finalizer of the stack's own Nodes (finalizers.go).
//
// CloudFormation invokes the function directly (ServiceToken = its ARN) and
// cfn.LambdaWrap answers on the pre-signed response URL, so no Node.js
// provider framework is needed.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"

	"github.com/nodewright/nodewright/internal/store"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		log.Error("load AWS config", "error", err)
		os.Exit(1)
	}
	sm := secretsmanager.NewFromConfig(cfg)
	r := &registrar{
		log:       log,
		cluster:   eksClusterClients(cfg, eks.NewFromConfig(cfg)),
		secrets:   secretsManagerValue(sm),
		putSecret: secretsManagerPut(sm),
		claims:    storeClaims(store.NewDynamoDBClient(cfg)),
	}
	// Started even without it, so each event fails with the reason instead
	// of CloudFormation waiting out a function that never answers.
	r.trust, r.trustErr = trustFromEnv(os.Getenv)
	lambda.Start(r.invoke)
}

// invoke serves both of the registrar's callers: CloudFormation's custom
// resource events (answered through their response URL) and the stack's
// rotation schedule.
func (r *registrar) invoke(ctx context.Context, raw json.RawMessage) error {
	if isRotation(raw) {
		return r.rotate(ctx)
	}
	var ev cfn.Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		return fmt.Errorf("decode custom resource event: %w", err)
	}
	_, err := cfn.LambdaWrap(r.serve)(ctx, ev)
	return err
}
