package kubeplane

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer lets the progress goroutine and the test share the log.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The first build is minutes of one silent go build: progress must say,
// at every interval until stopped, the step, the time so far and the
// expected total, and nothing after stop returns.
func TestProgressReportsUntilStopped(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	stop := progress(context.Background(), logger, 5*time.Millisecond, time.Now().Add(-90*time.Second), "compile")
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(buf.String(), "\n") < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	stop()
	out := buf.String()
	if strings.Count(out, "\n") < 2 {
		t.Fatalf("fewer than two progress lines:\n%s", out)
	}
	first := strings.SplitN(out, "\n", 2)[0]
	for _, want := range []string{"step=compile", "elapsed=1m30s", "expected-total=" + buildExpected.String()} {
		if !strings.Contains(first, want) {
			t.Errorf("progress line lacks %q: %s", want, first)
		}
	}
	time.Sleep(20 * time.Millisecond)
	if after := buf.String(); after != out {
		t.Errorf("progress logged after stop:\n%s", strings.TrimPrefix(after, out))
	}
	if progressEvery > 20*time.Second {
		t.Errorf("progressEvery %s: a line at least every 20 s", progressEvery)
	}
}
