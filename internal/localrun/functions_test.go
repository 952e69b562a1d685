package localrun

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// The function stand-in decodes like the Lambda runtime (the handler gets
// the event's JSON) and serializes a singleton's invocations.
func TestFunctionInvoke(t *testing.T) {
	var got []json.RawMessage
	running := 0
	f := &function{name: "x", timeout: time.Second, singleton: true, handle: func(ctx context.Context, raw json.RawMessage) (any, error) {
		running++
		defer func() { running-- }()
		if running > 1 {
			t.Error("singleton invoked concurrently")
		}
		if _, ok := ctx.Deadline(); !ok {
			t.Error("no invocation deadline")
		}
		got = append(got, raw)
		return events.SQSEventResponse{}, nil
	}}
	ev := scheduledEvent("us-east-1", "123456789012", "r", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if _, err := f.invoke(context.Background(), "schedule", ev); err != nil {
		t.Fatal(err)
	}
	var probe struct {
		DetailType string   `json:"detail-type"`
		Source     string   `json:"source"`
		Time       string   `json:"time"`
		Resources  []string `json:"resources"`
	}
	if err := json.Unmarshal(got[0], &probe); err != nil {
		t.Fatal(err)
	}
	if probe.DetailType != "Scheduled Event" || probe.Source != "aws.events" || probe.Time != "2026-01-02T03:04:05Z" ||
		len(probe.Resources) != 1 || probe.Resources[0] != "arn:aws:events:us-east-1:123456789012:rule/r" {
		t.Fatalf("scheduled event %s", got[0])
	}
}
