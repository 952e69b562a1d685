package storetest

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// claimCreateAndGet: create-if-absent at version 1 with a creation time,
// read back as written; missing names are ErrNotFound.
func claimCreateAndGet(t *testing.T, c *contract) {
	nc := c.create(t, "default-a", "default", "")
	if nc.ResourceVersion != "1" || !nc.CreationTimestamp.Time.Equal(c.clock.Now()) {
		t.Fatalf("after create: rv=%q created=%v, want 1 and %v", nc.ResourceVersion, nc.CreationTimestamp, c.clock.Now())
	}
	sameClaim(t, "get after create", c.get(t, nc.Name), nc)

	earlier := testClaim("default-b", "default", "")
	earlier.CreationTimestamp = metav1.NewTime(c.clock.Now().Add(-time.Hour))
	must(t, c.s.CreateNodeClaim(c.ctx, earlier))
	if got := c.get(t, earlier.Name); !got.CreationTimestamp.Equal(&earlier.CreationTimestamp) {
		t.Fatalf("a set creation time was replaced: %v, want %v", got.CreationTimestamp, earlier.CreationTimestamp)
	}

	again := testClaim("default-a", "other", "i-0123456789abcdef0")
	wantIs(t, "second create", c.s.CreateNodeClaim(c.ctx, again), store.ErrAlreadyExists)
	sameClaim(t, "get after a refused create", c.get(t, nc.Name), nc)

	_, err := c.s.GetNodeClaim(c.ctx, "missing")
	wantIs(t, "get missing", err, store.ErrNotFound)
	wantInvalid(t, "create without a name", c.s.CreateNodeClaim(c.ctx, testClaim("", "default", "")))
}

// claimCopiesInAndOut: no object given to or returned by the store aliases
// what it holds.
func claimCopiesInAndOut(t *testing.T, c *contract) {
	nc := c.create(t, "default-a", "default", "")
	nc.Labels["after"] = "create"
	got := c.get(t, nc.Name)
	if _, ok := got.Labels["after"]; ok {
		t.Fatal("changing the created object changed the stored claim")
	}
	got.Labels["after"] = "get"
	list, err := c.s.ListNodeClaims(c.ctx)
	must(t, err)
	list[0].Labels["after"] = "list"
	var inFn *apis.NodeClaim
	out, err := c.s.MutateNodeClaim(c.ctx, nc.Name, func(cl *apis.NodeClaim) error {
		inFn = cl
		cl.Labels["mutated"] = "yes"
		return nil
	})
	must(t, err)
	out.Labels["after"] = "mutate"
	inFn.Labels["after"] = "mutate-fn"
	got = c.get(t, nc.Name)
	if v, ok := got.Labels["after"]; ok || got.Labels["mutated"] != "yes" {
		t.Fatalf("stored claim changed through a returned object (after=%q) or lost the mutation: %v", v, got.Labels)
	}
}

// claimConditionalUpdate: an update applies only to the version it read.
func claimConditionalUpdate(t *testing.T, c *contract) {
	nc := c.create(t, "default-a", "default", "")
	a, b := c.get(t, nc.Name), c.get(t, nc.Name)
	a.Status.NodeName = "node-a"
	must(t, c.s.UpdateNodeClaim(c.ctx, a))
	if a.ResourceVersion != "2" {
		t.Fatalf("version after update %q, want 2", a.ResourceVersion)
	}
	b.Status.NodeName = "node-b"
	wantIs(t, "stale update", c.s.UpdateNodeClaim(c.ctx, b), store.ErrConflict)
	if b.ResourceVersion != "1" {
		t.Fatalf("a refused update moved the caller's version to %q", b.ResourceVersion)
	}
	sameClaim(t, "get after updates", c.get(t, nc.Name), a)

	noVersion := c.get(t, nc.Name)
	noVersion.ResourceVersion = ""
	wantInvalid(t, "update without a version", c.s.UpdateNodeClaim(c.ctx, noVersion))
	noVersion.ResourceVersion = "x"
	wantInvalid(t, "update with an invalid version", c.s.UpdateNodeClaim(c.ctx, noVersion))
	missing := testClaim("missing", "default", "")
	missing.ResourceVersion = "1"
	wantIs(t, "update missing", c.s.UpdateNodeClaim(c.ctx, missing), store.ErrNotFound)
}

// claimUpdateRaceHasOneWinner: writers of one version race; one wins.
func claimUpdateRaceHasOneWinner(t *testing.T, c *contract) {
	nc := c.create(t, "default-a", "default", "")
	const writers = 8
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		cl := nc.DeepCopy()
		cl.Status.NodeName = string(rune('a' + i))
		wg.Go(func() { errs[i] = c.s.UpdateNodeClaim(c.ctx, cl) })
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrConflict):
			t.Fatalf("racing update: %v", err)
		}
	}
	if won != 1 || c.get(t, nc.Name).ResourceVersion != "2" {
		t.Fatalf("%d writers won, want exactly 1", won)
	}
}

// claimMutate: fn applies to the latest version; its error aborts the
// write; fn may call the store.
func claimMutate(t *testing.T, c *contract) {
	nc := c.create(t, "default-a", "default", "")
	out, err := c.s.MutateNodeClaim(c.ctx, nc.Name, func(cl *apis.NodeClaim) error {
		if _, err := c.s.GetNodeClaim(c.ctx, cl.Name); err != nil { // re-entrant
			return err
		}
		cl.Status.NodeName = "node-a"
		return nil
	})
	must(t, err)
	if out.ResourceVersion != "2" || out.Status.NodeName != "node-a" {
		t.Fatalf("mutated: rv=%q node=%q", out.ResourceVersion, out.Status.NodeName)
	}
	sameClaim(t, "get after mutate", c.get(t, nc.Name), out)

	errStop := errors.New("stop")
	_, err = c.s.MutateNodeClaim(c.ctx, nc.Name, func(cl *apis.NodeClaim) error {
		cl.Status.NodeName = "not-written"
		return errStop
	})
	wantIs(t, "mutate whose fn fails", err, errStop)
	sameClaim(t, "get after an aborted mutate", c.get(t, nc.Name), out)

	called := false
	_, err = c.s.MutateNodeClaim(c.ctx, "missing", func(*apis.NodeClaim) error { called = true; return nil })
	wantIs(t, "mutate missing", err, store.ErrNotFound)
	if called {
		t.Fatal("fn ran for a missing claim")
	}
}

// claimMutateRetriesConflict: a write between Mutate's read and write makes
// it re-read and re-apply fn, so neither change is lost.
func claimMutateRetriesConflict(t *testing.T, c *contract) {
	nc := c.create(t, "default-a", "default", "")
	calls := 0
	out, err := c.s.MutateNodeClaim(c.ctx, nc.Name, func(cl *apis.NodeClaim) error {
		calls++
		if calls == 1 {
			other := c.get(t, nc.Name)
			other.Labels["other"] = "1"
			if err := c.s.UpdateNodeClaim(c.ctx, other); err != nil {
				return err
			}
		}
		cl.Labels["mine"] = "1"
		return nil
	})
	must(t, err)
	if calls != 2 || out.Labels["other"] != "1" || out.Labels["mine"] != "1" || out.ResourceVersion != "3" {
		t.Fatalf("after a conflicting write: fn ran %d times, claim rv=%q labels=%v", calls, out.ResourceVersion, out.Labels)
	}
}

// claimDeleteLeavesTombstone: a conditional delete turns the claim into a
// tombstone holding its final state; the name stays taken.
func claimDeleteLeavesTombstone(t *testing.T, c *contract) {
	nc := c.create(t, "default-a", "default", "i-0123456789abcdef0")
	stale := nc.DeepCopy()
	cur, err := c.s.MutateNodeClaim(c.ctx, nc.Name, func(cl *apis.NodeClaim) error { cl.Status.NodeName = "final"; return nil })
	must(t, err)
	wantIs(t, "stale delete", c.s.DeleteNodeClaim(c.ctx, stale), store.ErrConflict)
	_, err = c.s.GetTombstone(c.ctx, nc.Name)
	wantIs(t, "tombstone of a live claim", err, store.ErrNotFound)
	noVersion := cur.DeepCopy()
	noVersion.ResourceVersion = ""
	wantInvalid(t, "delete without a version", c.s.DeleteNodeClaim(c.ctx, noVersion))

	c.clock.Advance(time.Second)
	must(t, c.s.DeleteNodeClaim(c.ctx, cur))
	if cur.ResourceVersion != "3" {
		t.Fatalf("version after delete %q, want 3", cur.ResourceVersion)
	}
	_, err = c.s.GetNodeClaim(c.ctx, nc.Name)
	wantIs(t, "get deleted", err, store.ErrNotFound)
	ts, err := c.s.GetTombstone(c.ctx, nc.Name)
	must(t, err)
	sameClaim(t, "tombstone", ts.Claim, cur)
	if !ts.DeletedAt.Equal(c.clock.Now()) || !ts.ExpiresAt.Equal(c.clock.Now().Add(7*24*time.Hour)) {
		t.Fatalf("tombstone deleted %v expires %v, want now and 7 days on", ts.DeletedAt, ts.ExpiresAt)
	}
	wantIs(t, "second delete", c.s.DeleteNodeClaim(c.ctx, cur), store.ErrNotFound)
	wantIs(t, "update deleted", c.s.UpdateNodeClaim(c.ctx, cur), store.ErrNotFound)
	_, err = c.s.MutateNodeClaim(c.ctx, nc.Name, func(*apis.NodeClaim) error { return nil })
	wantIs(t, "mutate deleted", err, store.ErrNotFound)
	wantIs(t, "create over a tombstone", c.s.CreateNodeClaim(c.ctx, testClaim(nc.Name, "default", "")), store.ErrAlreadyExists)
	missing := testClaim("missing", "default", "")
	missing.ResourceVersion = "1"
	wantIs(t, "delete missing", c.s.DeleteNodeClaim(c.ctx, missing), store.ErrNotFound)
	_, err = c.s.GetTombstone(c.ctx, "missing")
	wantIs(t, "tombstone of a missing claim", err, store.ErrNotFound)
}

// claimTombstoneExpires: at its expiry a tombstone disappears, and after
// it the name can be created again.
func claimTombstoneExpires(t *testing.T, c *contract) {
	nc := c.create(t, "default-a", "default", "")
	must(t, c.s.DeleteNodeClaim(c.ctx, nc))
	c.clock.Advance(7*24*time.Hour - time.Second)
	if dead, err := c.s.ListTombstones(c.ctx); err != nil || len(dead) != 1 || dead[0].Claim.Name != nc.Name {
		t.Fatalf("tombstones a second before expiry: %v %v", dead, err)
	}
	c.clock.Advance(time.Second)
	_, err := c.s.GetTombstone(c.ctx, nc.Name)
	wantIs(t, "expired tombstone", err, store.ErrNotFound)
	if dead, err := c.s.ListTombstones(c.ctx); err != nil || len(dead) != 0 {
		t.Fatalf("tombstones after expiry: %v %v", dead, err)
	}
	c.clock.Advance(time.Second)
	again := c.create(t, nc.Name, "default", "")
	if again.ResourceVersion != "1" {
		t.Fatalf("re-created claim at version %q", again.ResourceVersion)
	}
	c.get(t, nc.Name)
}

// claimListsAndIndexes: listings hold live claims only, sorted by name;
// the pool and instance indexes find live claims only.
func claimListsAndIndexes(t *testing.T, c *contract) {
	if list, err := c.s.ListNodeClaims(c.ctx); err != nil || len(list) != 0 {
		t.Fatalf("empty store lists %v %v", names(list), err)
	}
	c.create(t, "c-b", "p1", "i-2")
	c.create(t, "c-a", "p1", "i-1")
	c.create(t, "c-c", "p2", "")
	must(t, c.s.DeleteNodeClaim(c.ctx, c.create(t, "c-d", "p1", "i-4")))
	wantNames := func(what string, got []*apis.NodeClaim, err error, want ...string) {
		t.Helper()
		if err != nil || !slices.Equal(names(got), want) {
			t.Fatalf("%s: %v %v, want %v", what, names(got), err, want)
		}
	}
	list, err := c.s.ListNodeClaims(c.ctx)
	wantNames("list", list, err, "c-a", "c-b", "c-c")
	list, skipped, err := c.s.ListNodeClaimsReport(c.ctx)
	wantNames("list with report", list, err, "c-a", "c-b", "c-c")
	if len(skipped) != 0 {
		t.Fatalf("skipped %v", skipped)
	}
	dead, err := c.s.ListTombstones(c.ctx)
	if err != nil || len(dead) != 1 || dead[0].Claim.Name != "c-d" {
		t.Fatalf("tombstones %v %v", dead, err)
	}
	list, err = c.s.ListNodeClaimsByNodePool(c.ctx, "p1")
	wantNames("pool p1", list, err, "c-a", "c-b")
	list, err = c.s.ListNodeClaimsByNodePool(c.ctx, "none")
	wantNames("pool none", list, err)

	got, err := c.s.GetNodeClaimByInstanceID(c.ctx, "i-1")
	if err != nil || got.Name != "c-a" {
		t.Fatalf("by instance i-1: %v %v", got, err)
	}
	_, err = c.s.GetNodeClaimByInstanceID(c.ctx, "i-4")
	wantIs(t, "instance of a deleted claim", err, store.ErrNotFound)
	_, err = c.s.GetNodeClaimByInstanceID(c.ctx, "i-9")
	wantIs(t, "unknown instance", err, store.ErrNotFound)
	c.create(t, "c-e", "p2", "i-1")
	_, err = c.s.GetNodeClaimByInstanceID(c.ctx, "i-1")
	wantInvalid(t, "two live claims of one instance", err)
}
