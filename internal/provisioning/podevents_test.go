package provisioning

import (
	"testing"
	"time"
)

func TestNominationEventsRateLimited(t *testing.T) {
	// A burst gets 10 Nominated events at once, then 5 a second; the
	// nominations themselves (Result.Nominated) are all counted.
	e := newEnv(t, poolOpts{}, pods("web", 40, "100m", "128Mi"))
	res := e.run(Trigger{Source: TriggerSchedule})
	if res.Nominated != 40 {
		t.Fatalf("nominated %d pods, want 40: %+v", res.Nominated, res)
	}
	if got := len(e.cluster.eventsWith(ReasonNominated)); got != 10 {
		t.Errorf("%d Nominated events, want the burst of 10", got)
	}
	// A negative rate (shadow mode, which learns each claim's pods from
	// these events) writes one per nomination.
	all := newEnv(t, poolOpts{}, pods("web", 40, "100m", "128Mi"))
	all.settings = Settings{NominationEventRate: -1}
	all.run(Trigger{Source: TriggerSchedule})
	if got := len(all.cluster.eventsWith(ReasonNominated)); got != 40 {
		t.Errorf("unlimited: %d Nominated events, want 40", got)
	}

	b := tokenBucket{burst: 10, rate: 5}
	now := time.Unix(1000, 0)
	taken := func() int {
		n := 0
		for range 100 {
			if b.take(now) {
				n++
			}
		}
		return n
	}
	if n := taken(); n != 10 {
		t.Errorf("first burst: %d events, want 10", n)
	}
	now = now.Add(time.Second)
	if n := taken(); n != 5 {
		t.Errorf("a second later: %d events, want 5", n)
	}
	now = now.Add(time.Hour)
	if n := taken(); n != 10 {
		t.Errorf("after an idle hour: %d events, want the burst of 10", n)
	}
	if unlimited := (tokenBucket{rate: -1}); !unlimited.take(now) {
		t.Error("a negative rate limited an event")
	}
}
