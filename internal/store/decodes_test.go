package store_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// TestListingsAfterReuseReadWhatIsStored: a store that keeps the claims its
// last listing decoded still lists what the table holds: a claim changed
// meanwhile, one whose name was written anew from version 1 after its
// tombstone expired, and never a change a caller made to a listed copy.
func TestListingsAfterReuseReadWhatIsStored(t *testing.T) {
	e := newEnv(t)
	s := e.store(t, store.WithTombstoneTTL(time.Minute))
	other := e.store(t, store.WithTombstoneTTL(time.Minute))
	for _, name := range []string{"a", "b"} {
		if err := s.CreateNodeClaim(e.ctx, claim(name, "v1", "")); err != nil {
			t.Fatal(err)
		}
	}
	first := listed(t, e, s)
	first["a"].Labels["changed-by"] = "caller"
	if got := listed(t, e, s)["a"]; got.Labels["changed-by"] != "" {
		t.Error("a caller's change to a listed claim showed in the next listing")
	}

	b := listed(t, e, other)["b"]
	b.Status.NodeName = "node-b"
	if err := other.UpdateNodeClaim(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	a := listed(t, e, other)["a"]
	if err := other.DeleteNodeClaim(e.ctx, a); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	if err := other.CreateNodeClaim(e.ctx, claim("a", "v2", "")); err != nil {
		t.Fatal(err)
	}

	got, fresh := listed(t, e, s), listed(t, e, e.store(t))
	if got["b"].Status.NodeName != "node-b" {
		t.Errorf("claim b changed in the table, listed as %+v", got["b"].Status)
	}
	if got["a"].NodePoolName() != "v2" || got["a"].ResourceVersion != "1" {
		t.Errorf("claim a written anew at version 1, listed with pool %q version %s", got["a"].NodePoolName(), got["a"].ResourceVersion)
	}
	if !reflect.DeepEqual(got, fresh) {
		t.Errorf("a store that kept its last listing lists\n%+v\na new store\n%+v", got, fresh)
	}
}

func listed(t *testing.T, e *env, s *store.Store) map[string]*apis.NodeClaim {
	t.Helper()
	ncs, err := s.ListNodeClaims(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*apis.NodeClaim{}
	for _, nc := range ncs {
		out[nc.Name] = nc
	}
	return out
}
