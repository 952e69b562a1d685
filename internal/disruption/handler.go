package disruption

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/queue"
)

// Handler is the disruption function's Lambda handler.
type Handler struct {
	C *Controller
}

// Handle runs one disruption pass. The function is invoked by:
//   - its EventBridge schedule (default every minute); the event carries
//     nothing the pass needs, so any event that is not an SQS batch —
//     including a manual test invoke — runs a pass and returns its Result;
//   - SQS batches from the disruption queue: the wake-ups earlier passes
//     sent (queue.KindDisruption, wakeup.go). Every well-formed batch runs
//     one pass, whatever the number of wake-ups in it; malformed records
//     are reported as batch item failures (events.SQSEventResponse), so the
//     queue's redrive policy parks them in the DLQ instead of dropping them.
//
// A failed pass fails the invocation; the schedule or SQS retries from the
// state in the store.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	if inv, err := queue.DecodeInvocation(raw); err == nil && !inv.Scheduled {
		return h.handleWakeups(ctx, inv.SQS)
	}
	return h.C.Run(ctx)
}

func (h *Handler) handleWakeups(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	wakeups := 0
	for _, rec := range ev.Records {
		if err := parseWakeup(rec.Body); err != nil {
			h.C.log.ErrorContext(ctx, "rejecting disruption queue message", "message-id", rec.MessageId, "error", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			continue
		}
		wakeups++
	}
	if wakeups == 0 {
		return resp, nil
	}
	_, err := h.C.Run(ctx)
	return resp, err
}

// parseWakeup accepts a disruption wake-up and nothing else.
func parseWakeup(body string) error {
	msg, err := queue.Parse(body)
	if err != nil {
		return err
	}
	if msg.Kind != queue.KindDisruption {
		return fmt.Errorf("message kind %q does not belong on the disruption queue", msg.Kind)
	}
	return nil
}

// NewHandler returns the Lambda handler over a Controller.
func NewHandler(d Deps) (*Handler, error) {
	return basedeps.Wrap(d, New, func(c *Controller) *Handler { return &Handler{C: c} })
}
