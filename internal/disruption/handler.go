package disruption

import (
	"context"
	"encoding/json"

	"github.com/nodewright/nodewright/internal/basedeps"
)

// Handler is the disruption function's Lambda handler.
type Handler struct {
	C *Controller
}

// Handle runs one disruption pass. The function is invoked by its
// EventBridge schedule (default every minute); the event carries nothing
// the pass needs, so any event — including a manual test invoke — runs it.
// A failed pass fails the invocation; the next tick retries from the state
// in the store.
func (h *Handler) Handle(ctx context.Context, _ json.RawMessage) (any, error) {
	return h.C.Run(ctx)
}

// NewHandler returns the Lambda handler over a Controller.
func NewHandler(d Deps) (*Handler, error) {
	return basedeps.Wrap(d, New, func(c *Controller) *Handler { return &Handler{C: c} })
}
