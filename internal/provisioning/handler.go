package provisioning

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/queue"
)

// Handler is the provisioner function's Lambda handler.
type Handler struct {
	P *Provisioner
}

// NewHandler returns the Lambda handler over a Provisioner.
func NewHandler(d Deps) (*Handler, error) {
	return basedeps.Wrap(d, New, func(p *Provisioner) *Handler { return &Handler{P: p} })
}

// Handle accepts the two events the provisioner is invoked with:
//   - SQS batches from the provision queue, each record a queue.Message of
//     kind "provision" (a nudge; its content is only a hint). Malformed
//     records are reported as batch item failures, so they reach the DLQ
//     instead of vanishing; well-formed ones trigger one run.
//   - EventBridge "Scheduled Event"s (the one-minute backstop).
//
// It returns events.SQSEventResponse for SQS batches and the run's Result
// for schedule ticks. A failed run fails the invocation (SQS redelivers the
// nudges; the schedule retries on the next tick).
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	inv, err := queue.DecodeInvocation(raw)
	if err != nil {
		return nil, fmt.Errorf("provisioner: %w", err)
	}
	if !inv.Scheduled {
		return h.handleSQS(ctx, inv.SQS)
	}
	res, err := h.P.Run(ctx, Trigger{Source: TriggerSchedule})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (h *Handler) handleSQS(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var nudges []time.Time
	for _, rec := range ev.Records {
		msg, err := queue.Parse(rec.Body)
		if err == nil && msg.Kind != queue.KindProvision {
			err = fmt.Errorf("message kind %q does not belong on the provision queue", msg.Kind)
		}
		if err != nil {
			h.P.log.ErrorContext(ctx, "rejecting provision queue message", "message-id", rec.MessageId, "error", err)
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: rec.MessageId})
			continue
		}
		nudges = append(nudges, msg.SentAt)
	}
	if len(nudges) == 0 {
		return resp, nil
	}
	if _, err := h.P.Run(ctx, Trigger{Source: TriggerNudge, Nudges: nudges}); err != nil {
		return resp, err
	}
	return resp, nil
}
