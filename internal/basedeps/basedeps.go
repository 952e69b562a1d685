// Package basedeps holds the optional dependencies every controller takes
// the same way (a logger, a clock, a metrics recorder, a context-aware
// sleep) and their defaults, so each controller's New fills them in one
// line and tests override only what they drive; and Wrap, the one way a
// controller package builds its Lambda handler over its controller.
package basedeps

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/nodewright/nodewright/internal/metrics"
)

// Logger returns l, or a logger that discards everything when l is nil.
func Logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// Clock returns now, or time.Now when now is nil.
func Clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// Recorder returns m, or a recorder whose metrics go nowhere when m is nil.
func Recorder(m *metrics.Recorder) *metrics.Recorder {
	if m == nil {
		return metrics.New(io.Discard, nil)
	}
	return m
}

// Wrap is the body of every controller package's NewHandler: build the
// controller from d with newC, then wrap it in the package's Lambda handler.
func Wrap[D, C, H any](d D, newC func(D) (C, error), wrap func(C) H) (H, error) {
	c, err := newC(d)
	if err != nil {
		var none H
		return none, err
	}
	return wrap(c), nil
}

// Sleeper returns s, or Sleep when s is nil.
func Sleeper(s func(ctx context.Context, d time.Duration) error) func(ctx context.Context, d time.Duration) error {
	if s == nil {
		return Sleep
	}
	return s
}

// Sleep waits d, or returns ctx's error as soon as ctx ends. A d of zero or
// less returns at once (with ctx's error if it has ended), so callers can
// pass a computed wait without checking it.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Default sets *field to def when it is zero or negative: every setting of
// a controller is a positive count, share or duration whose zero value
// means "not set".
func Default[T ~int | ~int32 | ~int64 | ~float64](field *T, def T) {
	if *field <= 0 {
		*field = def
	}
}
