package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/eventsamples"
)

type nopNudger struct{}

func (nopNudger) Nudge(context.Context, admission.Hint, time.Duration) error { return nil }

// FuzzFunctionURLEvent decodes arbitrary function URL events as the Lambda
// runtime does and serves them. Properties: no panic; every event the
// runtime can decode gets an HTTP answer (never an error that would make
// the API server see a failure other than the status), 2xx only for a
// valid review with the secret.
//
//	go test -run '^$' -fuzz '^FuzzFunctionURLEvent$' -fuzztime 60s ./functions/webhook
func FuzzFunctionURLEvent(f *testing.F) {
	review := string(eventsamples.Read(f, "admission-review-pods-status-unschedulable.json"))
	for _, ev := range []events.LambdaFunctionURLRequest{
		{RawPath: "/admit/s3cret", Body: review, RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "POST"}}},
		{RawPath: "/admit/s3cret", Body: "e30=", IsBase64Encoded: true},
		{RawPath: "/admit/nope", Headers: map[string]string{"X-Nodewright-Secret": "s3cret"}, Body: review},
	} {
		raw, _ := json.Marshal(ev)
		f.Add(raw)
	}
	f.Add([]byte(`{"rawPath":"/admit/s3cret","isBase64Encoded":true,"body":"!!"}`))
	h, err := admission.NewHandler(admission.Options{Secret: "s3cret", Nudger: nopNudger{}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var ev events.LambdaFunctionURLRequest
		if json.Unmarshal(raw, &ev) != nil {
			return // the runtime rejects it before the handler runs
		}
		resp := serve(t.Context(), h, ev)
		switch resp.StatusCode {
		case 200, 400, 401, 405:
		default:
			t.Fatalf("status %d for %s", resp.StatusCode, raw)
		}
		if !json.Valid([]byte(resp.Body)) {
			t.Fatalf("body is not JSON: %q", resp.Body)
		}
	})
}
