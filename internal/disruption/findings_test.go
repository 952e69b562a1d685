package disruption

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/meettest"
)

// An unchanged finding is emitted once per findingRepeat; a new one, or one
// whose text changed, at once.
func TestFindingMemoEmitsChangesAndRepeatsRarely(t *testing.T) {
	var m findingMemo
	t0 := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	f := Finding{Node: "a", Reason: ReasonUnconsol, Text: "no cheaper replacement"}
	steps := []struct {
		f    Finding
		at   time.Duration
		want bool
	}{
		{f, 0, true},
		{f, time.Minute, false},
		{Finding{Node: "a", Reason: ReasonUnconsol, Text: "pdb blocks"}, time.Minute, true},
		{Finding{Node: "b", Reason: ReasonUnconsol, Text: "no cheaper replacement"}, 2 * time.Minute, true},
		{f, findingRepeat - time.Second, false},
		{f, findingRepeat, true},
		{f, findingRepeat + time.Minute, false},
	}
	for i, s := range steps {
		now := t0.Add(s.at)
		m.forget(now)
		if got := m.due(s.f, now); got != s.want {
			t.Errorf("step %d (%+v at %s): due %v, want %v", i, s.f, s.at, got, s.want)
		}
	}
	m.forget(t0.Add(time.Hour))
	if len(m.last) != 0 {
		t.Errorf("memo kept %d findings an hour on", len(m.last))
	}
}

// gatedCluster's node events meet two at a time (meeting): a pass that
// writes its findings one at a time never gets two in flight.
type gatedCluster struct {
	fakeCluster
	m *meettest.Meeting
}

func (c *gatedCluster) NodeEvent(ctx context.Context, n *corev1.Node, typ, reason, format string, args ...any) error {
	c.m.Attend()
	return c.fakeCluster.NodeEvent(ctx, n, typ, reason, format, args...)
}

// A pass's findings are written concurrently, and every one is written
// before the pass goes on.
func TestFindingsAreWrittenConcurrentlyAndAll(t *testing.T) {
	f := newFixture(t, fixOpt{})
	var fs []Finding
	for i := range 5 {
		name := fmt.Sprintf("n%d", i)
		f.node(name, "m5.large")
		fs = append(fs, Finding{Node: name, Reason: ReasonUnconsol, Text: "no cheaper replacement"})
	}
	cl := &gatedCluster{fakeCluster: fakeCluster{f: f}, m: meettest.New(2)}
	c := &Controller{d: Deps{Cluster: cl, Now: func() time.Time { return f.now }}, s: Settings{MaxEvents: 100}, log: slog.New(slog.DiscardHandler)}
	c.findings(ctx, f.view(), fs)
	if got := len(cl.eventsWith(ReasonUnconsol)); got != len(fs) {
		t.Fatalf("%d finding events written by the time the pass went on, want %d", got, len(fs))
	}
	if most := cl.m.Most(); most < 2 {
		t.Errorf("at most %d finding events in flight at once, want them written concurrently", most)
	}
}
