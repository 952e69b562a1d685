package disruption

import (
	"context"
	"encoding/json"
)

// Handler is the disruption function's Lambda handler.
type Handler struct {
	C *Controller
}

// NewHandler returns the Lambda handler over a Controller.
func NewHandler(d Deps) (*Handler, error) {
	c, err := New(d)
	if err != nil {
		return nil, err
	}
	return &Handler{C: c}, nil
}

// Handle runs one disruption pass. The function is invoked by its
// EventBridge schedule (default every minute); the event carries nothing
// the pass needs, so any event — including a manual test invoke — runs it.
// A failed pass fails the invocation; the next tick retries from the state
// in the store.
func (h *Handler) Handle(ctx context.Context, _ json.RawMessage) (any, error) {
	return h.C.Run(ctx)
}
