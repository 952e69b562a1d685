package termination

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/store/storetest"
)

// Pure unit tests of Steps racing on one claim, over an in-memory store
// (store.ErrNotFound semantics like internal/store) and a fake clientset.

// newMemStore is the shared in-memory store (internal/store/storetest,
// held to the DynamoDB store's contract) holding claims.
func newMemStore(claims ...*apis.NodeClaim) *storetest.Store {
	st := storetest.New()
	st.Seed(claims...)
	return st
}

// hookCloud counts Terminate calls and runs hook inside each.
type hookCloud struct {
	mu    sync.Mutex
	calls int
	hook  func(call int)
}

func (c *hookCloud) InvisibleLongEnough(time.Time, time.Time) bool { return true }

func (c *hookCloud) Terminate(_ context.Context, ids ...string) error {
	c.mu.Lock()
	c.calls++
	n := c.calls
	c.mu.Unlock()
	if c.hook != nil {
		c.hook(n)
	}
	return nil
}

func (c *hookCloud) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// markedClaim is a claim marked for deletion whose instance runs but whose
// node never registered (so the Step goes straight to the instance).
func markedClaim(now time.Time) *apis.NodeClaim {
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "race-1", Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	cl.Status.InstanceID = "i-0123456789abcdef0"
	cl.Status.ProviderID = "aws:///us-west-2a/i-0123456789abcdef0"
	cl.MarkForDeletion(apis.DeletionReasonEmpty, "", metav1.NewTime(now))
	return cl
}

func newRaceTerminator(t *testing.T, st *storetest.Store, cloud *hookCloud) (*Terminator, *cloudtest.SyncBuffer) {
	t.Helper()
	logs := &cloudtest.SyncBuffer{}
	term, err := New(Deps{
		Store: st, Cloud: cloud,
		Cluster: kube.NewClientFromClientset(fake.NewClientset(), nil),
		Log:     slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if err != nil {
		t.Fatal(err)
	}
	return term, logs
}

func noWarnings(t *testing.T, logs string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			t.Errorf("concurrent steps logged %s", line)
		}
	}
}

// A work-queue message and a schedule pass step the same claim at once in
// one process: the instance is terminated once, both Steps finish, one of
// them as AlreadyDeleted, and nothing is logged as a problem.
func TestConcurrentStepsOnOneClaim(t *testing.T) {
	now := time.Now()
	cl := markedClaim(now)
	st := newMemStore(cl)
	second := make(chan struct{})
	cloud := &hookCloud{}
	cloud.hook = func(call int) {
		if call == 1 {
			// Hold the first Terminate until the other Step calls it too
			// (the race) or has had ample time to.
			select {
			case <-second:
			case <-time.After(300 * time.Millisecond):
			}
			return
		}
		close(second)
	}
	term, logs := newRaceTerminator(t, st, cloud)

	results := make([]Result, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Go(func() { results[i], errs[i] = term.Step(context.Background(), cl) })
	}
	wg.Wait()
	for i := range 2 {
		if errs[i] != nil || !results[i].Done {
			t.Fatalf("step %d: %+v %v", i, results[i], errs[i])
		}
	}
	if n := cloud.count(); n != 1 {
		t.Errorf("TerminateInstances called %d times for one claim, want 1", n)
	}
	phases := []string{results[0].Phase, results[1].Phase}
	oneEach := phases[0] == PhaseTerminated && phases[1] == PhaseAlreadyDeleted || phases[1] == PhaseTerminated && phases[0] == PhaseAlreadyDeleted
	if !oneEach {
		t.Errorf("phases %v, want one %s and one %s", phases, PhaseTerminated, PhaseAlreadyDeleted)
	}
	if n := strings.Count(logs.String(), `"msg":"nodeclaim terminated"`); n != 1 {
		t.Errorf("termination reported %d times, want once", n)
	}
	noWarnings(t, logs.String())
	if len(term.inUse) != 0 {
		t.Errorf("per-claim locks left behind: %v", term.inUse)
	}
}

// Another process (another Lambda invocation) tombstones the claim while
// this Step terminates its instance: the Step ends quietly as
// AlreadyDeleted instead of warning that it cannot record its progress and
// counting the termination a second time.
func TestStepFindsClaimTombstonedMidway(t *testing.T) {
	now := time.Now()
	cl := markedClaim(now)
	st := newMemStore(cl)
	cloud := &hookCloud{hook: func(int) {
		// The other process deletes the version it read, as against DynamoDB.
		cur, err := st.GetNodeClaim(context.Background(), cl.Name)
		if err == nil {
			err = st.DeleteNodeClaim(context.Background(), cur)
		}
		if err != nil {
			t.Error(err)
		}
	}}
	term, logs := newRaceTerminator(t, st, cloud)
	res, err := term.Step(context.Background(), cl)
	if err != nil || !res.Done || res.Phase != PhaseAlreadyDeleted {
		t.Fatalf("step: %+v %v, want Done %s", res, err, PhaseAlreadyDeleted)
	}
	noWarnings(t, logs.String())
	if strings.Contains(logs.String(), `"msg":"nodeclaim terminated"`) {
		t.Error("the other process's termination reported as this Step's")
	}
	if !strings.Contains(logs.String(), "tombstoned by another termination step") {
		t.Errorf("no debug record of the concurrent tombstone: %s", logs.String())
	}
}
