package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/metrics"
)

func TestHeartbeatCountsOnlySuccessfulRuns(t *testing.T) {
	var out bytes.Buffer
	rec := metrics.New(&out, metrics.Dimensions{"function": "lifecycle"})
	fail := false
	h := WithHeartbeat(rec, slog.New(slog.DiscardHandler), func(context.Context, json.RawMessage) (any, error) {
		if fail {
			return nil, errors.New("boom")
		}
		return "ok", nil
	})
	if got, err := h(context.Background(), nil); err != nil || got != "ok" {
		t.Fatalf("success: %v %v", got, err)
	}
	if !strings.Contains(out.String(), metrics.FunctionRuns) || !strings.Contains(out.String(), `"function":"lifecycle"`) {
		t.Fatalf("no heartbeat after a successful run: %s", out.String())
	}
	out.Reset()
	fail = true
	if _, err := h(context.Background(), nil); err == nil {
		t.Fatal("error swallowed")
	}
	if strings.Contains(out.String(), metrics.FunctionRuns) {
		t.Errorf("heartbeat after a failed run: %s", out.String())
	}
}

// The mains hand Run their handlers as method values; they must be
// recognised as Handlers, or the heartbeat is silently not attached.
func TestHandlerMethodValuesAreHandlers(t *testing.T) {
	var h any = (&stub{}).Handle
	if _, ok := h.(Handler); !ok {
		t.Fatal("a Handle method value is not an app.Handler")
	}
}

type stub struct{}

func (*stub) Handle(context.Context, json.RawMessage) (any, error) { return nil, nil }
