package disruption

import (
	"testing"
	"time"
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
