package admission_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/queue"
)

type sender struct{ err error }

func (s sender) SendMessage(ctx context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	return &sqs.SendMessageOutput{}, s.err
}

// Sent nudges are counted by reason; failed ones are not.
func TestNudgerCountsSentNudges(t *testing.T) {
	var out bytes.Buffer
	rec := metrics.New(&out, metrics.Dimensions{"cluster": "c", "function": "webhook"})
	ok := admission.ProvisionNudger{Queue: queue.New(sender{}, "https://sqs.local/q"), Metrics: rec}
	bad := admission.ProvisionNudger{Queue: queue.New(sender{errors.New("throttled")}, "https://sqs.local/q"), Metrics: rec}
	for range 2 {
		if err := ok.Nudge(context.Background(), admission.Hint{Namespace: "ns", Name: "p", Reason: "Unschedulable"}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := bad.Nudge(context.Background(), admission.Hint{Namespace: "ns", Name: "p", Reason: "Created"}, 0); err == nil {
		t.Fatal("send error swallowed")
	}
	if err := rec.Flush(); err != nil {
		t.Fatal(err)
	}
	line := out.String()
	if strings.Count(line, "\n") != 1 || !strings.Contains(line, `"`+metrics.WebhookNudges+`":2`) || !strings.Contains(line, `"reason":"Unschedulable"`) ||
		strings.Contains(line, "Created") {
		t.Errorf("EMF: %s", line)
	}
}
