package interruption

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/metrics"
)

// MessageTypeMalformed is the message_type dimension of messages that do
// not parse (they go to the DLQ).
const MessageTypeMalformed = "malformed"

// Handler is the interruption function's Lambda handler: an SQS event source
// on the interruption queue (batches of up to 10 EventBridge envelopes) with
// ReportBatchItemFailures.
type Handler struct {
	C *Controller
}

// Handle decodes an SQS event and returns events.SQSEventResponse. Events
// that are not SQS batches fail the invocation with an error naming them.
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var ev events.SQSEvent
	if err := json.Unmarshal(raw, &ev); err != nil {
		return nil, fmt.Errorf("interruption: decode SQS event: %w", err)
	}
	if ev.Records == nil {
		var probe struct {
			DetailType string `json:"detail-type"`
			Source     string `json:"source"`
		}
		_ = json.Unmarshal(raw, &probe)
		return nil, fmt.Errorf("%w (detail-type %q, source %q); the function is fed by the interruption queue only", ErrNotSQS, probe.DetailType, probe.Source)
	}
	return h.HandleSQS(ctx, ev), nil
}

// NewHandler returns the Lambda handler over a Controller.
func NewHandler(d Deps) (*Handler, error) {
	return basedeps.Wrap(d, New, func(c *Controller) *Handler { return &Handler{C: c} })
}

// HandleSQS processes one batch. Malformed messages and messages whose
// handling failed are reported as batch item failures: SQS makes them
// visible again and, after the queue's maxReceiveCount, moves them to the
// dead-letter queue. Everything else is acknowledged (deleted).
func (h *Handler) HandleSQS(ctx context.Context, ev events.SQSEvent) events.SQSEventResponse {
	c := h.C
	defer func() {
		if err := c.d.Metrics.Flush(); err != nil {
			c.log.WarnContext(ctx, "flushing metrics", "error", err)
		}
	}()
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	failed := map[string]bool{}
	fail := func(id string) {
		if !failed[id] {
			failed[id] = true
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
	}
	received := c.d.Now()
	var items []Item
	for _, rec := range ev.Records {
		m, err := Parse(rec.Body)
		if err != nil {
			c.d.Metrics.Add(metrics.InterruptionMessages, 1, metrics.Dimensions{"message_type": MessageTypeMalformed})
			c.log.ErrorContext(ctx, "malformed interruption message; reported as a batch item failure (the queue's redrive policy moves it to the DLQ)",
				"message-id", rec.MessageId, "receive-count", rec.Attributes["ApproximateReceiveCount"], "error", err.Error(),
				"body", truncate(rec.Body, 512))
			fail(rec.MessageId)
			continue
		}
		c.d.Metrics.Add(metrics.InterruptionMessages, 1, metrics.Dimensions{"message_type": string(m.Kind)})
		if sent, ok := sentAt(rec); ok {
			c.d.Metrics.Observe(metrics.InterruptionMessageLatency, metrics.Seconds, max(received.Sub(sent), 0).Seconds(),
				metrics.Dimensions{"message_type": string(m.Kind)})
		}
		if len(m.InstanceIDs) == 0 {
			c.log.InfoContext(ctx, "interruption message needs no action; acknowledged", "message-id", rec.MessageId,
				"event-id", m.ID, "detail-type", m.DetailType)
			continue
		}
		for _, id := range m.InstanceIDs {
			items = append(items, Item{Msg: m, InstanceID: id, MessageID: rec.MessageId})
		}
	}
	for _, o := range c.Process(ctx, items) {
		attrs := []any{"message-id", o.MessageID, "instance-id", o.InstanceID, "action", string(o.Action), "owned", o.Owned}
		if o.Claim != "" {
			attrs = append(attrs, "nodeclaim", o.Claim)
		}
		if o.Node != "" {
			attrs = append(attrs, "node", o.Node)
		}
		if o.Err != nil {
			c.log.ErrorContext(ctx, "interruption message failed; it will be redelivered", append(attrs, "error", o.Err.Error())...)
			fail(o.MessageID)
			continue
		}
		if o.Owned && o.Action != ActionNone {
			attrs = append(attrs, "first", o.First, "replacements", o.Replacements)
			if !o.Provisioned.IsZero() {
				attrs = append(attrs, "replacement-pass-after", o.Provisioned.Sub(received).Round(time.Millisecond).String())
			}
			if !o.Tainted.IsZero() {
				attrs = append(attrs, "tainted-after", o.Tainted.Sub(received).Round(time.Millisecond).String())
			}
			c.log.InfoContext(ctx, "interruption handled", attrs...)
		}
	}
	return resp
}

// sentAt is when SQS received the message (its SentTimestamp attribute, in
// epoch milliseconds).
func sentAt(rec events.SQSMessage) (time.Time, bool) {
	v := rec.Attributes["SentTimestamp"]
	if v == "" {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ErrNotSQS is returned for invocations that are not SQS batches.
var ErrNotSQS = errors.New("interruption: not an SQS event")
