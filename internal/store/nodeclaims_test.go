package store_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

func claim(name, pool, instanceID string) *apis.NodeClaim {
	nc := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apis.NodePoolLabelKey: pool}}}
	nc.Status.InstanceID = instanceID
	return nc
}

func TestNodeClaimLifecycle(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, store.WithTombstoneTTL(time.Hour))
	ctx := e.ctx

	nc := claim("default-abc12", "default", "")
	if err := s.CreateNodeClaim(ctx, nc); err != nil {
		t.Fatal(err)
	}
	if nc.ResourceVersion != "1" || nc.CreationTimestamp.IsZero() {
		t.Fatalf("after create: rv=%q created=%v", nc.ResourceVersion, nc.CreationTimestamp)
	}
	// Deterministic name, second launch attempt: refused, not duplicated.
	if err := s.CreateNodeClaim(ctx, claim("default-abc12", "default", "")); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second create: want ErrAlreadyExists, got %v", err)
	}

	got, err := s.GetNodeClaim(ctx, nc.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.NodePoolName() != "default" || got.ResourceVersion != "1" {
		t.Fatalf("get: pool=%q rv=%q", got.NodePoolName(), got.ResourceVersion)
	}
	got.Status.InstanceID = "i-0123456789abcdef0"
	got.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched", "", metav1.NewTime(e.clock.Now()))
	if err := s.UpdateNodeClaim(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "2" {
		t.Fatalf("rv after update %q", got.ResourceVersion)
	}
	// The caller's stale copy (version 1) must be refused.
	nc.Status.NodeName = "stale"
	if err := s.UpdateNodeClaim(ctx, nc); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: want ErrConflict, got %v", err)
	}
	if err := s.UpdateNodeClaim(ctx, claim("missing", "default", "")); err == nil || errors.Is(err, store.ErrConflict) {
		t.Fatalf("update without version must fail as bad input, got %v", err)
	}

	byID, err := s.GetNodeClaimByInstanceID(ctx, "i-0123456789abcdef0")
	if err != nil {
		t.Fatal(err)
	}
	if byID.Name != nc.Name || !byID.IsTrue(apis.ConditionLaunched) {
		t.Fatalf("by instance: %s launched=%v", byID.Name, byID.IsTrue(apis.ConditionLaunched))
	}
	if err := s.CreateNodeClaim(ctx, claim("other-1", "other", "i-1")); err != nil {
		t.Fatal(err)
	}
	pool, err := s.ListNodeClaimsByNodePool(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if len(pool) != 1 || pool[0].Name != nc.Name {
		t.Fatalf("by nodepool default: %v", names(pool))
	}

	// Delete leaves a tombstone, invisible to live reads.
	if err := s.DeleteNodeClaim(ctx, got); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetNodeClaim(ctx, nc.Name); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: want ErrNotFound, got %v", err)
	}
	if _, err := s.GetNodeClaimByInstanceID(ctx, "i-0123456789abcdef0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("by instance after delete: want ErrNotFound, got %v", err)
	}
	if err := s.DeleteNodeClaim(ctx, got); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: want ErrNotFound, got %v", err)
	}
	if err := s.CreateNodeClaim(ctx, claim(nc.Name, "default", "")); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("create over a fresh tombstone: want ErrAlreadyExists, got %v", err)
	}
	live, err := s.ListNodeClaims(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != 1 || live[0].Name != "other-1" {
		t.Fatalf("live claims %v", names(live))
	}
	ts, err := s.GetTombstone(ctx, nc.Name)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Claim.Status.InstanceID != "i-0123456789abcdef0" || !ts.ExpiresAt.Equal(e.clock.Now().Add(time.Hour).Truncate(time.Second)) {
		t.Fatalf("tombstone %+v", ts)
	}
	tss, err := s.ListTombstones(ctx)
	if err != nil || len(tss) != 1 {
		t.Fatalf("tombstones %v %v", tss, err)
	}

	// dynalite never expires items (and real TTL is lazy): the store must
	// hide the tombstone once its TTL has passed, and let the name be reused.
	e.clock.Advance(time.Hour + time.Second)
	if _, err := s.GetTombstone(ctx, nc.Name); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired tombstone: want ErrNotFound, got %v", err)
	}
	if tss, err := s.ListTombstones(ctx); err != nil || len(tss) != 0 {
		t.Fatalf("tombstones after expiry %v %v", tss, err)
	}
	if err := s.CreateNodeClaim(ctx, claim(nc.Name, "default", "")); err != nil {
		t.Fatalf("create over an expired tombstone: %v", err)
	}
}

func names(ncs []*apis.NodeClaim) []string {
	out := make([]string, len(ncs))
	for i, nc := range ncs {
		out[i] = nc.Name
	}
	return out
}

// Two writers holding the same version of one claim: exactly one wins.
func TestConcurrentWritersExactlyOneWins(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	for round := range 20 {
		name := fmt.Sprintf("race-%d", round)
		if err := s.CreateNodeClaim(e.ctx, claim(name, "default", "")); err != nil {
			t.Fatal(err)
		}
		a, err := s.GetNodeClaim(e.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.GetNodeClaim(e.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		a.Status.NodeName, b.Status.NodeName = "writer-a", "writer-b"
		errs := make([]error, 2)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, c := range []*apis.NodeClaim{a, b} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				errs[i] = s.UpdateNodeClaim(e.ctx, c)
			}()
		}
		close(start)
		wg.Wait()
		wins, conflicts := 0, 0
		for _, err := range errs {
			switch {
			case err == nil:
				wins++
			case errors.Is(err, store.ErrConflict):
				conflicts++
			default:
				t.Fatalf("round %d: unexpected error %v", round, err)
			}
		}
		if wins != 1 || conflicts != 1 {
			t.Fatalf("round %d: wins=%d conflicts=%d", round, wins, conflicts)
		}
		final, err := s.GetNodeClaim(e.ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		winner := "writer-a"
		if errs[0] != nil {
			winner = "writer-b"
		}
		if final.Status.NodeName != winner || final.ResourceVersion != "2" {
			t.Fatalf("round %d: stored %q rv %s, winner %s", round, final.Status.NodeName, final.ResourceVersion, winner)
		}
	}
}

// MutateNodeClaim retries conflicts, so N concurrent increments all land.
func TestMutateNodeClaimRetriesConflicts(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	if err := s.CreateNodeClaim(e.ctx, claim("counter", "default", "")); err != nil {
		t.Fatal(err)
	}
	const writers = 6
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.MutateNodeClaim(e.ctx, "counter", func(nc *apis.NodeClaim) error {
				if nc.Annotations == nil {
					nc.Annotations = map[string]string{}
				}
				n, _ := strconv.Atoi(nc.Annotations["count"])
				nc.Annotations["count"] = strconv.Itoa(n + 1)
				nc.Annotations[fmt.Sprintf("writer-%d", i)] = "x"
				return nil
			})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetNodeClaim(e.ctx, "counter")
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["count"] != strconv.Itoa(writers) || got.ResourceVersion != strconv.Itoa(writers+1) {
		t.Fatalf("count=%s rv=%s, want %d/%d", got.Annotations["count"], got.ResourceVersion, writers, writers+1)
	}
	if _, err := s.MutateNodeClaim(e.ctx, "absent", func(*apis.NodeClaim) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("mutate absent: want ErrNotFound, got %v", err)
	}
}

// More than 1 MB of claims per shard: DynamoDB (and dynalite) cut a Query at
// 1 MB, so the list must follow LastEvaluatedKey in every shard.
func TestListPaginatesOverOneMegabyte(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	const n = 400
	// Random (incompressible) padding: bodies are gzipped, and 8 shards each
	// need more than 1 MB -> ~30 KB per claim, ~12 MB in total.
	rnd := make([]byte, 30<<10)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range rnd {
		rnd[i] = byte(r.Uint32())
	}
	pad := base64.StdEncoding.EncodeToString(rnd)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			pool := "a"
			if i%2 == 1 {
				pool = "b"
			}
			nc := claim(fmt.Sprintf("nc-%04d", i), pool, fmt.Sprintf("i-%04d", i))
			nc.Annotations = map[string]string{"pad": pad[i%64:]} // distinct per claim
			errs <- s.CreateNodeClaim(e.ctx, nc)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	before := e.api.queries.Load()
	all, err := s.ListNodeClaims(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	pages := e.api.queries.Load() - before
	if len(all) != n {
		t.Fatalf("listed %d claims, want %d", len(all), n)
	}
	for i, nc := range all {
		if nc.Name != fmt.Sprintf("nc-%04d", i) || nc.Annotations["pad"] != pad[i%64:] {
			t.Fatalf("claim %d: %s (pad %d bytes)", i, nc.Name, len(nc.Annotations["pad"]))
		}
	}
	if pages <= 8 {
		t.Fatalf("listing ~12 MB over 8 shards took %d Query page(s); pagination not exercised", pages)
	}
	// Index reads paginate too.
	small := e.store(t, store.WithPageSize(17))
	b, err := small.ListNodeClaimsByNodePool(e.ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != n/2 {
		t.Fatalf("nodepool b: %d claims, want %d", len(b), n/2)
	}
	t.Logf("list of %d claims (~%d KB) took %d pages", n, n*len(pad)*3/4>>10, pages)
}
