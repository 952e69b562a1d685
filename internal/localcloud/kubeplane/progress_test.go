package kubeplane

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// records is a slog handler that hands every record to the test.
type records chan slog.Record

func (r records) Enabled(context.Context, slog.Level) bool { return true }
func (r records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r records) WithGroup(string) slog.Handler            { return r }
func (r records) Handle(_ context.Context, rec slog.Record) error {
	r <- rec.Clone()
	return nil
}

// The first build is minutes of one silent go build: progress must say,
// at every interval until stopped, the step, the time so far and the
// expected total, and nothing once stop has returned.
func TestProgressReportsUntilStopped(t *testing.T) {
	if progressEvery > 20*time.Second {
		t.Errorf("progressEvery %s: a line at least every 20 s", progressEvery)
	}
	got := make(records, 1000)
	stop := progress(context.Background(), slog.New(got), 5*time.Millisecond, time.Now().Add(-90*time.Second), "compile")
	first := <-got
	<-got
	stop()
	attrs := map[string]string{}
	first.Attrs(func(a slog.Attr) bool {
		attrs[a.Key] = a.Value.String()
		return true
	})
	want := map[string]string{"step": "compile", "elapsed": "1m30s", "expected-total": buildExpected.String()}
	for k, v := range want {
		if attrs[k] != v {
			t.Errorf("progress line %q: %s=%q, want %q", first.Message, k, attrs[k], v)
		}
	}
	for len(got) > 0 {
		<-got
	}
	time.Sleep(20 * time.Millisecond)
	if len(got) != 0 {
		t.Errorf("%d progress lines after stop", len(got))
	}
}
