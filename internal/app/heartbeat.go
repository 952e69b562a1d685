package app

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/nodewright/nodewright/internal/metrics"
)

// Handler is the Lambda handler of every controller function.
type Handler = func(ctx context.Context, raw json.RawMessage) (any, error)

// WithHeartbeat counts each successful invocation of h in
// metrics.FunctionRuns (by function, from rec's static dimensions). The stack
// alarms on it with missing data as breaching: a function that stopped
// running, or stopped succeeding, emits nothing, which no other alarm sees.
func WithHeartbeat(rec *metrics.Recorder, log *slog.Logger, h Handler) Handler {
	return func(ctx context.Context, raw json.RawMessage) (any, error) {
		out, err := h(ctx, raw)
		if err != nil {
			return out, err
		}
		rec.Add(metrics.FunctionRuns, 1, nil)
		if ferr := rec.Flush(); ferr != nil {
			log.WarnContext(ctx, "flush heartbeat metric", "error", ferr)
		}
		return out, nil
	}
}
