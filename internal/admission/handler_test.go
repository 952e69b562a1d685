package admission

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

type recordingNudger struct {
	mu     sync.Mutex
	hints  []Hint
	delays []time.Duration
	err    error
}

func (r *recordingNudger) Nudge(_ context.Context, h Hint, d time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.hints = append(r.hints, h)
	r.delays = append(r.delays, d)
	return nil
}

func (r *recordingNudger) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.hints)
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestHandler(t *testing.T, n Nudger, clock *fakeClock) *Handler {
	t.Helper()
	h, err := NewHandler(Options{Secret: "s3cret", Nudger: n, Now: clock.now,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func sampleReview(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "events", "admission-review-pods-status-unschedulable.json"))
	if err != nil {
		// The sample payloads are committed with the events folder; fall
		// back to an inline review so this package tests on its own.
		return []byte(reviewJSON("UPDATE", "status", "uid-1", "", "Unschedulable"))
	}
	return b
}

func reviewJSON(op, sub, uid, nodeName, reason string) string {
	cond := ""
	if reason != "" {
		cond = fmt.Sprintf(`,"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":%q}]}`, reason)
	}
	return fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":%q,
	"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},
	"subResource":%q,"operation":%q,"namespace":"default","name":"inflate-1",
	"object":{"metadata":{"name":"inflate-1","namespace":"default"},"spec":{"nodeName":%q}%s}}}`, uid, sub, op, nodeName, cond)
}

func TestServeAllowsAndNudgesUnschedulable(t *testing.T) {
	n := &recordingNudger{}
	h := newTestHandler(t, n, &fakeClock{t: time.Unix(1000, 0)})
	resp := h.Serve(context.Background(), Request{Method: "POST", Path: "/hook/s3cret", Body: sampleReview(t)})
	if resp.Status != 200 {
		t.Fatalf("status %d: %s", resp.Status, resp.Body)
	}
	var out review
	if err := json.Unmarshal(resp.Body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Response == nil || !out.Response.Allowed || out.Response.UID == "" {
		t.Fatalf("response not an allowing AdmissionReview: %s", resp.Body)
	}
	if n.count() != 1 || n.hints[0].Reason != "Unschedulable" || n.delays[0] != 0 {
		t.Fatalf("nudges = %+v delays %v", n.hints, n.delays)
	}
}

func TestServeDecisions(t *testing.T) {
	cases := []struct {
		name      string
		body      string
		wantNudge bool
		wantDelay time.Duration
	}{
		{"unschedulable status update", reviewJSON("UPDATE", "status", "u", "", "Unschedulable"), true, 0},
		{"scheduled pod", reviewJSON("UPDATE", "status", "u", "node-1", ""), false, 0},
		{"bound pod still carrying old condition", reviewJSON("UPDATE", "status", "u", "node-1", "Unschedulable"), false, 0},
		{"other condition reason", reviewJSON("UPDATE", "status", "u", "", "SchedulerError"), false, 0},
		{"create fallback", reviewJSON("CREATE", "", "u", "", ""), true, 5 * time.Second},
		{"create of bound pod", reviewJSON("CREATE", "", "u", "node-1", ""), false, 0},
		{"spec update", reviewJSON("UPDATE", "", "u", "", "Unschedulable"), false, 0},
		{"daemonset pod", strings.Replace(reviewJSON("UPDATE", "status", "u", "", "Unschedulable"),
			`"metadata":{"name":"inflate-1"`, `"metadata":{"ownerReferences":[{"kind":"DaemonSet","controller":true}],"name":"inflate-1"`, 1), false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := &recordingNudger{}
			h := newTestHandler(t, n, &fakeClock{t: time.Unix(1000, 0)})
			resp := h.Serve(context.Background(), Request{Method: "POST", Path: "/s3cret", Body: []byte(tc.body)})
			if resp.Status != 200 || !strings.Contains(string(resp.Body), `"allowed":true`) {
				t.Fatalf("status %d body %s", resp.Status, resp.Body)
			}
			if got := n.count() == 1; got != tc.wantNudge {
				t.Fatalf("nudged=%v want %v", got, tc.wantNudge)
			}
			if tc.wantNudge && n.delays[0] != tc.wantDelay {
				t.Fatalf("delay %v want %v", n.delays[0], tc.wantDelay)
			}
		})
	}
}

func TestServeRejectsUnauthenticatedAndMalformed(t *testing.T) {
	good := []byte(reviewJSON("UPDATE", "status", "u", "", "Unschedulable"))
	cases := []struct {
		name   string
		req    Request
		status int
	}{
		{"no secret", Request{Method: "POST", Path: "/hook", Body: good}, 401},
		{"wrong secret", Request{Method: "POST", Path: "/hook/s3cre", Body: good}, 401},
		{"wrong header", Request{Method: "POST", Path: "/hook", Headers: map[string]string{"x-nodewright-secret": "nope"}, Body: good}, 401},
		{"header secret", Request{Method: "POST", Path: "/hook", Headers: map[string]string{"x-nodewright-secret": "s3cret"}, Body: good}, 200},
		{"not json", Request{Method: "POST", Path: "/s3cret", Body: []byte("{")}, 400},
		{"no request", Request{Method: "POST", Path: "/s3cret", Body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`)}, 400},
		{"v1beta1", Request{Method: "POST", Path: "/s3cret", Body: []byte(strings.Replace(string(good), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1))}, 400},
		{"GET", Request{Method: "GET", Path: "/s3cret"}, 405},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := &recordingNudger{}
			h := newTestHandler(t, n, &fakeClock{t: time.Unix(1000, 0)})
			resp := h.Serve(context.Background(), tc.req)
			if resp.Status != tc.status {
				t.Fatalf("status %d want %d (%s)", resp.Status, tc.status, resp.Body)
			}
			if tc.status != 200 && n.count() != 0 {
				t.Fatalf("rejected request nudged the provisioner")
			}
		})
	}
}

// A burst of 1,000 calls spread over one second from one warm instance must
// cause a handful of nudges, not one per pod.
func TestServeCoalescesBursts(t *testing.T) {
	n := &recordingNudger{}
	clock := &fakeClock{t: time.Unix(1000, 0)}
	h := newTestHandler(t, n, clock)
	for i := 0; i < 1000; i++ {
		clock.t = time.Unix(1000, 0).Add(time.Duration(i) * time.Millisecond)
		body := reviewJSON("UPDATE", "status", fmt.Sprintf("uid-%d", i), "", "Unschedulable")
		if resp := h.Serve(context.Background(), Request{Method: "POST", Path: "/s3cret", Body: []byte(body)}); resp.Status != 200 {
			t.Fatalf("call %d: %d", i, resp.Status)
		}
	}
	if got := n.count(); got != 1 {
		t.Fatalf("1,000 calls within one window caused %d nudges, want 1", got)
	}
	clock.t = clock.t.Add(time.Second)
	h.Serve(context.Background(), Request{Method: "POST", Path: "/s3cret", Body: []byte(reviewJSON("UPDATE", "status", "late", "", "Unschedulable"))})
	if got := n.count(); got != 2 {
		t.Fatalf("a call after the window caused no nudge (%d)", got)
	}
}

func TestFailedNudgeIsRetriedByNextCall(t *testing.T) {
	n := &recordingNudger{err: errors.New("queue down")}
	h := newTestHandler(t, n, &fakeClock{t: time.Unix(1000, 0)})
	body := []byte(reviewJSON("UPDATE", "status", "u", "", "Unschedulable"))
	if resp := h.Serve(context.Background(), Request{Method: "POST", Path: "/s3cret", Body: body}); resp.Status != 200 {
		t.Fatalf("a failed nudge must not fail the pod operation: %d", resp.Status)
	}
	n.mu.Lock()
	n.err = nil
	n.mu.Unlock()
	h.Serve(context.Background(), Request{Method: "POST", Path: "/s3cret", Body: body})
	if n.count() != 1 {
		t.Fatalf("nudge after a failure was coalesced away")
	}
}

func TestServeHTTPAndSecretNotLogged(t *testing.T) {
	var logs strings.Builder
	n := &recordingNudger{}
	h, err := NewHandler(Options{Secret: "s3cret", Nudger: n, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/hook/s3cret", "application/json", strings.NewReader(reviewJSON("UPDATE", "status", "u", "", "Unschedulable")))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || n.count() != 1 {
		t.Fatalf("status %d nudges %d", resp.StatusCode, n.count())
	}
	resp, err = http.Post(srv.URL+"/hook/wrong-s3cret-guess", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("logs contain the secret or a guess of it: %s", logs.String())
	}
}

func TestNewHandlerRefusesEmptySecret(t *testing.T) {
	if _, err := NewHandler(Options{Nudger: &recordingNudger{}}); err == nil {
		t.Fatal("empty secret accepted")
	}
}

func BenchmarkServe(b *testing.B) {
	n := &recordingNudger{}
	h, _ := NewHandler(Options{Secret: "s3cret", Nudger: n, Logger: slog.New(slog.DiscardHandler)})
	body := []byte(reviewJSON("UPDATE", "status", "u", "", "Unschedulable"))
	req := Request{Method: "POST", Path: "/hook/s3cret", Body: body}
	ctx := context.Background()
	b.ReportAllocs()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		h.Serve(ctx, req)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/float64(b.N), "µs/call")
}
