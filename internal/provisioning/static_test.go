package provisioning

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

func replicas(n int64) *int64 { return &n }

// staticCounts are the pool's live claims: active ones and those marked
// for deletion.
func (e *env) staticCounts() (active, marked int) {
	for _, cl := range e.store.live() {
		if cl.Deleting() {
			marked++
		} else {
			active++
		}
	}
	return active, marked
}

func (e *env) setReplicas(n int64) { e.cfg.NodePool("default").Spec.Replicas = replicas(n) }

// A static pool gets its replicas with no pod pending, keeps them across
// runs, grows and shrinks with spec.replicas, and never launches twice.
func TestStaticPoolKeepsItsReplicas(t *testing.T) {
	e := newEnv(t, poolOpts{replicas: replicas(2)}, nil)
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 2 || len(res.Launched) != 2 || res.Nominated != 0 {
		t.Fatalf("first run %+v: want 2 claims launched for no pod", res)
	}
	for _, cl := range e.store.live() {
		if cl.NodePoolName() != "default" || cl.Labels["team"] != "web" || !cl.IsTrue(apis.ConditionLaunched) || cl.Spec.Resources.Requests == nil {
			t.Errorf("static claim %s: labels %v conditions %v", cl.Name, cl.Labels, cl.Status.Conditions)
		}
	}
	if res := e.run(Trigger{Source: TriggerSchedule}); len(res.Created) != 0 || e.launcher.callCount() != 2 {
		t.Fatalf("second run %+v, %d launches: a kept pool launches nothing", res, e.launcher.callCount())
	}
	e.setReplicas(3)
	if res := e.run(Trigger{Source: TriggerSchedule}); len(res.Launched) != 1 {
		t.Fatalf("scale to 3: %+v", res)
	}
	e.setReplicas(1)
	e.run(Trigger{Source: TriggerSchedule})
	if active, marked := e.staticCounts(); active != 1 || marked != 2 {
		t.Fatalf("scale to 1: %d active, %d marked; want 1 and 2", active, marked)
	}
	for _, cl := range e.store.live() {
		if cl.Deleting() && cl.DeletionReason() != apis.DeletionReasonOverprovisioned {
			t.Errorf("claim %s marked with reason %q", cl.Name, cl.DeletionReason())
		}
	}
	// Marked claims drain; until they are gone they neither count nor are
	// marked again, and nothing is launched for them.
	if res := e.run(Trigger{Source: TriggerSchedule}); len(res.Created) != 0 {
		t.Fatalf("after the scale-down: %+v", res)
	}
	if active, marked := e.staticCounts(); active != 1 || marked != 2 || e.launcher.callCount() != 3 {
		t.Fatalf("after the scale-down: %d active, %d marked, %d launches", active, marked, e.launcher.callCount())
	}
}

// Pending pods never open a node of a static pool; limits.nodes caps the
// pool.
func TestStaticPoolTakesNoPendingPodsAndStopsAtItsLimit(t *testing.T) {
	e := newEnv(t, poolOpts{replicas: replicas(3), limits: map[string]string{"nodes": "2"}}, pods("web", 4, "1", "1Gi"))
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Launched) != 2 || res.Nominated != 0 || res.Unschedulable != 4 {
		t.Fatalf("result %+v: want 2 static claims (limit), no pod nominated, 4 unschedulable", res)
	}
	if res := e.run(Trigger{Source: TriggerSchedule}); len(res.Created) != 0 {
		t.Fatalf("at the limit: %+v", res)
	}
}

// A run whose launches fail leaves write-ahead records; the next run
// resumes them instead of planning more, so the pool never exceeds its
// replicas.
func TestStaticPoolResumesInsteadOfRelaunching(t *testing.T) {
	e := newEnv(t, poolOpts{replicas: replicas(2)}, nil)
	e.settings.LaunchAttempts = 1
	e.launcher.failNext = []error{errors.New("throttled"), errors.New("throttled")}
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 2 || len(res.Failed) != 2 {
		t.Fatalf("failing run %+v", res)
	}
	res = e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 0 || len(res.Resumed) != 2 || len(e.store.live()) != 2 || len(e.launcher.instances) != 2 {
		t.Fatalf("resuming run %+v: %d claims, %d instances", res, len(e.store.live()), len(e.launcher.instances))
	}
}

// crashingStore fails every claim write after the first `after` ones: the
// process died there (the write's effect stays, its answer is lost).
type crashingStore struct {
	*memStore
	after, n int
}

var errCrashed = errors.New("process crashed")

func (c *crashingStore) step() bool {
	c.n++
	return c.n > c.after
}

// write runs one claim write unless the process already died; the write
// that kills it takes effect, its answer is lost.
func (c *crashingStore) write(f func() error) error {
	crashed := c.step()
	if c.n > c.after+1 {
		return errCrashed
	}
	err := f()
	if crashed {
		return errCrashed
	}
	return err
}

func (c *crashingStore) CreateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	return c.write(func() error { return c.memStore.CreateNodeClaim(ctx, nc) })
}

func (c *crashingStore) UpdateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	return c.write(func() error { return c.memStore.UpdateNodeClaim(ctx, nc) })
}

func (c *crashingStore) MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	var out *apis.NodeClaim
	err := c.write(func() (err error) { out, err = c.memStore.MutateNodeClaim(ctx, name, fn); return err })
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Killed after any claim write, on the way up or down, the next run
// brings the pool to exactly its replicas: never an extra instance, never
// more than the surplus marked.
func TestStaticPoolCrashSweep(t *testing.T) {
	for _, tc := range []struct {
		name     string
		from, to int64
	}{{"up", 0, 3}, {"down", 4, 1}} {
		for after := 0; after < 8; after++ {
			e := newEnv(t, poolOpts{replicas: replicas(tc.from)}, nil)
			e.run(Trigger{Source: TriggerSchedule})
			e.setReplicas(tc.to)
			p, err := New(Deps{Store: &crashingStore{memStore: e.store, after: after}, Cluster: e.cluster, Launcher: e.launcher,
				Catalog: func(context.Context) (*catalog.Catalog, error) { return e.cat, nil }, Unavailable: e.launcher.unavailable, Config: e.cfg, Now: e.clock.Now, Sleep: e.clock.Sleep})
			if err != nil {
				t.Fatal(err)
			}
			_, _ = p.Run(context.Background(), Trigger{Source: TriggerSchedule})
			// The crashed run's lease runs out before the next run.
			e.clock.t = e.clock.t.Add(2 * time.Minute)
			e.run(Trigger{Source: TriggerSchedule})
			active, marked := e.staticCounts()
			instances := 0
			for _, cl := range e.store.live() {
				if _, ok := e.launcher.instances[cl.Name]; ok && !cl.Deleting() {
					instances++
				}
			}
			wantMarked := int(max(tc.from-tc.to, 0))
			if int64(active) != tc.to || marked != wantMarked || int64(instances) != tc.to || len(e.launcher.instances) != int(max(tc.from, tc.to)) {
				t.Errorf("%s, crash after write %d: %d active, %d marked, %d active instances, %d instances ever; want %d, %d, %d, %d",
					tc.name, after, active, marked, instances, len(e.launcher.instances), tc.to, wantMarked, tc.to, max(tc.from, tc.to))
			}
		}
	}
}

// A redeployed stack starts a new table whose lease token starts over; its
// static claims must not take the earlier stack's names (and CreateFleet
// client tokens), which pods' UIDs would have kept apart.
func TestStaticClaimNamesDifferAcrossStacks(t *testing.T) {
	names := map[string]bool{}
	for range 2 {
		e := newEnv(t, poolOpts{replicas: replicas(1)}, nil)
		e.run(Trigger{Source: TriggerSchedule})
		for _, cl := range e.store.live() {
			if names[cl.Name] {
				t.Fatalf("claim name %s reused by a fresh stack", cl.Name)
			}
			names[cl.Name] = true
		}
	}
}
