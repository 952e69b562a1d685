package provisioning

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/queue"
)

// TestThrottledPassKeepsItsClaims: the first launch of a pass comes back
// throttled (EC2 still answering RequestLimitExceeded after the SDK's
// retries). The pass calls EC2 for no further claim, keeps all three
// claims (none deleted, no pods re-planned onto new ones), says on each
// that it waits (Launched=Unknown, Throttled), asks for another run after
// a backoff, and that run launches the same three claims.
func TestThrottledPassKeepsItsClaims(t *testing.T) {
	e := newEnv(t, poolOpts{types: []string{"m5.large"}}, pods("web", 3, "1500m", "512Mi"))
	e.settings.LaunchConcurrency = 1
	e.launcher.failNext = []error{&nwaws.LaunchError{NodeClaim: "any", Err: fmt.Errorf("create fleet: %w: RequestLimitExceeded", nwaws.ErrThrottled)}}
	var delays []time.Duration
	p := e.provisioner()
	p.d.Nudge = func(_ context.Context, msg queue.Message, d time.Duration) error {
		if msg.Kind == queue.KindProvision {
			delays = append(delays, d)
		}
		return nil
	}
	res, err := p.Run(context.Background(), Trigger{Source: TriggerSchedule})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 3 || len(res.Throttled) != 3 || len(res.CapacityFailed) != 0 || e.launcher.callCount() != 1 {
		t.Fatalf("throttled pass: %+v after %d launch calls, want 3 claims kept throttled after 1 call", res, e.launcher.callCount())
	}
	for _, cl := range e.store.live() {
		if c := cl.Condition(apis.ConditionLaunched); c == nil || c.Status != metav1.ConditionUnknown || c.Reason != ReasonThrottled {
			t.Errorf("claim %s: Launched %+v, want Unknown/%s", cl.Name, c, ReasonThrottled)
		}
	}
	if len(delays) != 1 || delays[0] < 5*time.Second {
		t.Errorf("provision nudges %v, want one after the throttle backoff", delays)
	}

	kept := slices.Sorted(slices.Values(res.Created))
	res = e.run(Trigger{Source: TriggerSchedule})
	if got := slices.Sorted(slices.Values(res.Resumed)); len(res.Created) != 0 || !slices.Equal(got, kept) {
		t.Fatalf("next run: %+v, want the 3 kept claims resumed and none created", res)
	}
	for _, cl := range e.store.live() {
		if !cl.IsTrue(apis.ConditionLaunched) || e.store.tombstone(cl.Name) != nil {
			t.Errorf("claim %s not launched on the next run (or deleted)", cl.Name)
		}
	}
	if n := len(e.store.live()); n != 3 || len(e.launcher.instances) != 3 {
		t.Errorf("%d claims, %d instances, want 3 and 3", n, len(e.launcher.instances))
	}
}

// TestKeptClaimResumesAfterItsSettledAttempts: a launch that failed after
// settling two CreateFleet attempts (its error says attempt 2 is next)
// keeps its claim, the claim records the attempt, and the next run's
// launch of it starts there, not at the tokens already answered.
func TestKeptClaimResumesAfterItsSettledAttempts(t *testing.T) {
	e := newEnv(t, poolOpts{types: []string{"m5.large"}}, pods("web", 1, "1500m", "512Mi"))
	e.settings.LaunchAttempts = 1
	e.launcher.failNext = []error{&nwaws.AttemptError{Next: 2, Err: fmt.Errorf("create fleet: InternalError")}}
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 1 || len(res.Failed) != 1 {
		t.Fatalf("first run: %+v, want one claim created and kept after its failed launch", res)
	}
	live := e.store.live()
	if len(live) != 1 || live[0].NextLaunchAttempt() != 2 {
		t.Fatalf("kept claims %+v, want one recording attempt 2 next", live)
	}
	res = e.run(Trigger{Source: TriggerSchedule})
	if len(res.Resumed) != 1 {
		t.Fatalf("second run: %+v, want the kept claim resumed", res)
	}
	e.launcher.mu.Lock()
	defer e.launcher.mu.Unlock()
	if got := e.launcher.firsts; len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Errorf("launches' first attempts %v, want [0 2]", got)
	}
}
