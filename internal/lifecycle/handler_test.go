package lifecycle_test

import (
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// Malformed work items are reported as batch item failures (so SQS parks
// them in the DLQ), never dropped; unknown events are errors.
func TestHandlerRejectsBadInput(t *testing.T) {
	e := newEnv(t)
	h := e.handler(e.deps())
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "bad-json", Body: "{"},
		{MessageId: "wrong-kind", Body: `{"kind":"provision","sentAt":"2026-11-22T00:00:00Z"}`},
		{MessageId: "no-subject", Body: `{"kind":"lifecycle","sentAt":"2026-11-22T00:00:00Z"}`},
		{MessageId: "gone-claim", Body: `{"kind":"lifecycle","subject":"never-existed","sentAt":"2026-11-22T00:00:00Z"}`},
	}}
	raw, _ := json.Marshal(ev)
	res, err := h.Handle(e.ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range res.(events.SQSEventResponse).BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, id := range []string{"bad-json", "wrong-kind", "no-subject"} {
		if !failed[id] {
			t.Errorf("%s not reported as a failure", id)
		}
	}
	if failed["gone-claim"] {
		t.Error("a message about a deleted claim is done, not a failure")
	}
	if _, err := h.Handle(e.ctx, json.RawMessage(`{"detail-type":"Something Else","source":"x"}`)); err == nil {
		t.Error("unknown event accepted")
	}
}
