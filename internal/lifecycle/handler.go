package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/queue"
)

// inlineLimit: follow-ups due sooner than this are run in the same
// invocation (SQS delays have whole-second granularity), within
// inlineBudget per message.
const (
	inlineLimit  = time.Second
	inlineBudget = 10 * time.Second
)

// Handler is the lifecycle function's Lambda handler.
type Handler struct {
	C *Controller
	// Sleep waits between inline steps (tests may replace it).
	Sleep func(ctx context.Context, d time.Duration) error
}

// NewHandler returns the Lambda handler over a Controller.
func NewHandler(d Deps) (*Handler, error) {
	return basedeps.Wrap(d, New, func(c *Controller) *Handler { return &Handler{C: c, Sleep: basedeps.Sleep} })
}

// Handle accepts the two events the lifecycle function is invoked with:
//   - SQS batches from the work queue, each record a queue.Message of kind
//     "lifecycle" naming a NodeClaim. Each claim is reconciled; work still
//     in progress is requeued with the delay the step asked for. Malformed
//     records and failed reconciles are reported as batch item failures
//     (events.SQSEventResponse), so SQS retries them and parks repeated
//     failures in the DLQ.
//   - EventBridge "Scheduled Event"s: a pass over every claim plus garbage
//     collection (returns the PassResult). A claim that fails is reported
//     and does not fail the invocation (ReconcileAll).
func (h *Handler) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	defer func() {
		if err := h.C.d.Metrics.Flush(); err != nil {
			h.C.log.WarnContext(ctx, "flushing metrics", "error", err)
		}
	}()
	inv, err := queue.DecodeInvocation(raw)
	if err != nil {
		return nil, fmt.Errorf("lifecycle: %w", err)
	}
	if !inv.Scheduled {
		return h.handleSQS(ctx, inv.SQS), nil
	}
	return h.C.ReconcileAll(ctx)
}

// handleSQS reconciles each claim named in the batch once (duplicates of
// one claim share the outcome) and concurrently across claims.
func (h *Handler) handleSQS(ctx context.Context, ev events.SQSEvent) events.SQSEventResponse {
	resp := events.SQSEventResponse{BatchItemFailures: []events.SQSBatchItemFailure{}}
	var mu sync.Mutex
	fail := func(id string, err error) {
		h.C.failed(ctx, failedWorkItem, err, "message-id", id)
		mu.Lock()
		resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		mu.Unlock()
	}
	bySubject := map[string][]string{}
	var subjects []string
	now := h.C.d.Now()
	for _, rec := range ev.Records {
		msg, err := parseWork(rec.Body)
		if err != nil {
			fail(rec.MessageId, err)
			continue
		}
		current, err := h.C.currentChain(ctx, msg)
		if err != nil {
			fail(rec.MessageId, err)
			continue
		}
		if !current {
			h.C.log.DebugContext(ctx, "dropped a superseded lifecycle work message", "nodeclaim", msg.Subject, "chain", msg.Chain, "reason", msg.Reason)
			continue
		}
		if wait := msg.NotBefore.Sub(now); !msg.NotBefore.IsZero() && wait > 0 {
			// Longer than SQS can delay: pass it on for the rest of the wait.
			if err := h.C.requeue(ctx, msg.Subject, msg.Reason, wait); err != nil {
				fail(rec.MessageId, err)
			}
			continue
		}
		if _, seen := bySubject[msg.Subject]; !seen {
			subjects = append(subjects, msg.Subject)
		}
		bySubject[msg.Subject] = append(bySubject[msg.Subject], rec.MessageId)
	}
	var wg sync.WaitGroup
	for _, subject := range subjects {
		wg.Go(func() {
			if err := h.work(ctx, subject); err != nil {
				for _, id := range bySubject[subject] {
					fail(id, fmt.Errorf("nodeclaim %s: %w", subject, err))
				}
			}
		})
	}
	wg.Wait()
	return resp
}

func parseWork(body string) (queue.Message, error) {
	msg, err := queue.Parse(body)
	if err != nil {
		return msg, err
	}
	if msg.Kind != queue.KindLifecycle {
		return msg, fmt.Errorf("message kind %q does not belong on the work queue", msg.Kind)
	}
	if msg.Subject == "" {
		return msg, fmt.Errorf("lifecycle message without a subject (nodeclaim name)")
	}
	return msg, nil
}

// work reconciles one claim, stepping again in place while the next step is
// due within a second, and requeues what is left.
func (h *Handler) work(ctx context.Context, subject string) error {
	start := time.Now()
	for {
		out, err := h.C.Reconcile(ctx, subject)
		if err != nil {
			return err
		}
		if out.Done || out.RequeueAfter <= 0 {
			return nil
		}
		if out.RequeueAfter < inlineLimit && time.Since(start)+out.RequeueAfter < inlineBudget && h.hasTime(ctx, out.RequeueAfter) {
			if err := h.Sleep(ctx, out.RequeueAfter); err != nil {
				return err
			}
			continue
		}
		return h.C.requeue(ctx, subject, out.Action, out.RequeueAfter)
	}
}

// hasTime reports whether the invocation can afford to wait d and step
// again (a few seconds kept for the requeue).
func (h *Handler) hasTime(ctx context.Context, d time.Duration) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > d+5*time.Second
}
