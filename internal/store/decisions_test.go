package store_test

import (
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

// Decisions come back by time window, oldest first, with their kind, id
// and body; expired ones are gone.
func TestDecisionsByWindow(t *testing.T) {
	e := newEnv(t)
	st := e.store(t)
	t0 := e.clock.Now()
	for i, d := range []store.Decision{
		{At: t0.Add(-2 * time.Hour), Kind: "launch", ID: "run-1", Body: []byte(`{"n":1}`)},
		{At: t0.Add(-30 * time.Minute), Kind: "fleet", ID: "disruption", Body: []byte(`{"n":2}`)},
		{At: t0.Add(-10 * time.Minute), Kind: "launch", ID: "run-2#x", Body: []byte(`{"n":3}`)},
	} {
		if err := st.PutDecision(e.ctx, d); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	got, err := st.ListDecisions(e.ctx, t0.Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Kind != "fleet" || got[0].ID != "disruption" || string(got[0].Body) != `{"n":2}` ||
		got[1].ID != "run-2#x" || !got[1].At.Equal(t0.Add(-10*time.Minute).Truncate(time.Millisecond)) {
		t.Fatalf("window: %+v", got)
	}
	e.clock.Advance(store.DecisionTTL - 20*time.Minute)
	if got, err := st.ListDecisions(e.ctx, t0.Add(-3*time.Hour)); err != nil || len(got) != 1 {
		t.Fatalf("after the TTL only the newest is left, got %d (%v)", len(got), err)
	}
	if err := st.PutDecision(e.ctx, store.Decision{Kind: "launch"}); err == nil {
		t.Error("a decision without a time was accepted")
	}
}
