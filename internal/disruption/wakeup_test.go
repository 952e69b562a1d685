package disruption

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/queue"
)

// lastPodEvent sets when the claim's node last saw a pod come or go.
func lastPodEvent(cl *apis.NodeClaim, at time.Time) { cl.Status.LastPodEventTime = metav1.NewTime(at) }

// The pool's consolidateAfter is 30 s: the first candidate still inside it
// is the one woken for; nodes already eligible, protected, or (WhenEmpty)
// busy are not waited for.
func TestNextEligible(t *testing.T) {
	for _, tc := range []struct {
		policy, want string
		in           time.Duration
	}{
		{"WhenEmptyOrUnderutilized", "busy", 5 * time.Second},
		{"WhenEmpty", "empty", 20 * time.Second},
	} {
		f := newFixture(t, fixOpt{policy: tc.policy})
		_, cl := f.node("empty", "m5.large")
		lastPodEvent(cl, f.now.Add(-10*time.Second))
		_, cl = f.node("busy", "m5.xlarge")
		lastPodEvent(cl, f.now.Add(-25*time.Second))
		f.pod("p", "busy", "500m", "512Mi")
		f.node("old", "m5.large") // empty for an hour: eligible now
		_, cl = f.node("kept", "m5.large")
		lastPodEvent(cl, f.now.Add(-29*time.Second))
		cl.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
		cands, _, err := Candidates(ctx, f.view())
		if err != nil {
			t.Fatal(err)
		}
		at, node := NextEligible(cands, f.now)
		if node != tc.want || !at.Equal(f.now.Add(tc.in)) {
			t.Errorf("%s: next eligible %s at +%v, want %s at +%v", tc.policy, node, at.Sub(f.now), tc.want, tc.in)
		}
	}
	f := newFixture(t, fixOpt{})
	f.node("old", "m5.large")
	cands, _, err := Candidates(ctx, f.view())
	if err != nil {
		t.Fatal(err)
	}
	if at, node := NextEligible(cands, f.now); !at.IsZero() || node != "" {
		t.Errorf("nothing waiting, got %s at %v", node, at)
	}
}

func TestWakeDelay(t *testing.T) {
	now := t0
	for _, tc := range []struct {
		at     time.Time
		period time.Duration
		want   time.Duration
		send   bool
	}{
		{time.Time{}, time.Minute, 0, false},
		{now.Add(10 * time.Second), time.Minute, 10 * time.Second, true},
		{now.Add(time.Minute), time.Minute, 0, false},                // the tick comes no later
		{now.Add(-time.Second), time.Minute, 0, true},                // already due
		{now.Add(40 * time.Minute), time.Hour, queue.MaxDelay, true}, // SQS's limit; the woken pass sends the rest
	} {
		d, send := WakeDelay(tc.at, now, tc.period)
		if d != tc.want || send != tc.send {
			t.Errorf("WakeDelay(+%v, period %v) = %v, %v; want %v, %v", tc.at.Sub(now), tc.period, d, send, tc.want, tc.send)
		}
	}
}

func TestPendingCovers(t *testing.T) {
	now := t0
	at := now.Add(20 * time.Second)
	for _, tc := range []struct {
		pending time.Time
		want    bool
	}{
		{time.Time{}, false},
		{at, true},
		{now.Add(5 * time.Second), true},   // an earlier pass wakes first and looks again
		{now.Add(30 * time.Second), false}, // too late for at
		{now, false},                       // due: its pass may be this one
	} {
		if got := pendingCovers(tc.pending, at, now); got != tc.want {
			t.Errorf("pending +%v for +20s: %v, want %v", tc.pending.Sub(now), got, tc.want)
		}
	}
}

// wakeups records the wake-up messages a harness's controller sends.
type wakeups struct {
	delays []time.Duration
}

func (w *wakeups) send(_ context.Context, m queue.Message, d time.Duration) error {
	if m.Kind != queue.KindDisruption {
		return nil
	}
	w.delays = append(w.delays, d)
	return nil
}

// A node inside its consolidateAfter gets one wake-up, not one per pass;
// the woken pass decides, and the validation delay gets its own wake-up.
// A lost record (a crash after the send) costs one more message.
func TestControllerWakesForConsolidateAfter(t *testing.T) {
	f := newFixture(t, fixOpt{})
	_, cl := f.node("empty", "m5.large")
	lastPodEvent(cl, f.now.Add(-10*time.Second))
	h := newHarness(t, f, Settings{ValidationDelay: 5 * time.Second})
	w := &wakeups{}
	h.c.d.Wakeup = w.send

	res := h.run(t)
	if res.Decided || !res.WakeSent || !res.WakeAt.Equal(t0.Add(20*time.Second)) || len(w.delays) != 1 || w.delays[0] != 20*time.Second {
		t.Fatalf("first pass: %+v, wake-ups %v", res, w.delays)
	}
	h.now = t0.Add(5 * time.Second)
	if res = h.run(t); res.WakeSent || len(w.delays) != 1 {
		t.Fatalf("second pass sent another wake-up: %+v, %v", res, w.delays)
	}
	// Lose the record, as a crash between send and record would.
	kv, err := h.st.GetKV(ctx, WakeupKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.st.DeleteKV(ctx, WakeupKey, kv.Version); err != nil {
		t.Fatal(err)
	}
	if res = h.run(t); !res.WakeSent || len(w.delays) != 2 || w.delays[1] != 15*time.Second {
		t.Fatalf("pass after a lost record: %+v, %v", res, w.delays)
	}
	// The woken pass: the node is eligible, emptiness decides, and the
	// decision's validation is the next wake-up.
	h.now = t0.Add(20 * time.Second)
	if res = h.run(t); !res.Decided || res.Waiting != waitingValidation || !res.WakeSent || len(w.delays) != 3 || w.delays[2] != 5*time.Second {
		t.Fatalf("woken pass: %+v, %v", res, w.delays)
	}
	h.now = t0.Add(25 * time.Second)
	if res = h.run(t); !res.Executed || len(w.delays) != 3 {
		t.Fatalf("validating pass: %+v, %v", res, w.delays)
	}
}

// The disruption queue's batches: one pass for the wake-ups, malformed
// records and other kinds reported as batch item failures (the DLQ keeps
// them), and no pass for a batch without a wake-up.
func TestHandlerWakeups(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("empty", "m5.large")
	h := newHarness(t, f, Settings{ValidationDelay: 5 * time.Second})
	hd := &Handler{C: h.c}
	batch := func(bodies ...string) events.SQSEventResponse {
		t.Helper()
		ev := events.SQSEvent{}
		for i, b := range bodies {
			ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: b, EventSource: "aws:sqs"})
		}
		raw, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		out, err := hd.Handle(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		return out.(events.SQSEventResponse)
	}
	decided := func() bool {
		_, err := h.st.GetKV(ctx, CommandKey)
		return err == nil
	}
	lifecycle := `{"kind":"lifecycle","subject":"claim-empty"}`
	if r := batch(`not json`, lifecycle); len(r.BatchItemFailures) != 2 || decided() {
		t.Fatalf("batch without a wake-up: %+v, decided %v", r, decided())
	}
	r := batch(`{"kind":"disruption","reason":"consolidateAfter of node empty"}`, `{"kind":"nudge"}`, `{"kind":"disruption"}`)
	if len(r.BatchItemFailures) != 1 || r.BatchItemFailures[0].ItemIdentifier != "m1" || !decided() {
		t.Fatalf("batch with wake-ups: %+v, decided %v", r, decided())
	}
	// A schedule tick (or any other event) still runs a pass.
	out, err := hd.Handle(ctx, json.RawMessage(`{"detail-type":"Scheduled Event","source":"aws.events","detail":{}}`))
	if res, ok := out.(*Result); err != nil || !ok || res.Waiting != waitingValidation {
		t.Fatalf("tick: %+v %v", out, err)
	}
}
