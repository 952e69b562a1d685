// Command webhook is the admission webhook Lambda: the kube-apiserver calls it
// (through a function URL) when the scheduler marks a pod Unschedulable; it
// always allows and nudges the provisioner through the provision queue.
package main

import (
	"context"
	"encoding/base64"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/settings"
)

func main() {
	ctx := context.Background()
	s, err := settings.FromEnv(settings.Getenv)
	log := settings.Logger(os.Stdout, s.LogLevel, "webhook")
	if err != nil {
		log.Error("configuration", "error", err.Error())
		os.Exit(1)
	}
	cfg, err := settings.AWSConfig(ctx)
	if err != nil {
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	rec := metrics.New(os.Stdout, metrics.Dimensions{"cluster": s.ClusterName, "function": "webhook"})
	h, err := admission.WebhookHandler(ctx, s, cfg, log, rec)
	if err != nil {
		log.Error("start", "error", err.Error())
		os.Exit(1)
	}
	lambda.Start(func(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
		resp := serve(ctx, h, ev)
		// Only sent nudges are recorded (coalesced calls are not), so most
		// invocations flush nothing and write no EMF line.
		if err := rec.Flush(); err != nil {
			log.Warn("flush metrics", "error", err.Error())
		}
		return resp, nil
	})
}

// serve adapts a function URL (or API Gateway HTTP API 2.0) event.
func serve(ctx context.Context, h *admission.Handler, ev events.LambdaFunctionURLRequest) events.LambdaFunctionURLResponse {
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		decoded, err := base64.StdEncoding.DecodeString(ev.Body)
		if err != nil {
			return events.LambdaFunctionURLResponse{StatusCode: 400, Body: `{"error":"bad base64 body"}`}
		}
		body = decoded
	}
	headers := make(map[string]string, len(ev.Headers))
	for k, v := range ev.Headers {
		headers[strings.ToLower(k)] = v
	}
	resp := h.Serve(ctx, admission.Request{Method: ev.RequestContext.HTTP.Method, Path: ev.RawPath, Headers: headers, Body: body})
	return events.LambdaFunctionURLResponse{StatusCode: resp.Status, Headers: map[string]string{"content-type": "application/json"}, Body: string(resp.Body)}
}
