package inspect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/dynalite"
	"github.com/nodewright/nodewright/internal/store"
)

var dynaliteEndpoint string

func TestMain(m *testing.M) { dynalite.Main(m, &dynaliteEndpoint) }

// newStore creates a fresh table on dynalite whose store clock reads clock.
func newStore(t *testing.T, ctx context.Context, clock func() time.Time) *store.Store {
	t.Helper()
	db := dynalite.Client(t, dynaliteEndpoint)
	return cloudtest.NewTable(ctx, t, db, fmt.Sprintf("inspect-%d", time.Now().UnixNano()), store.WithClock(clock))
}

// TestStoreRoundTripGolden writes the fixtures through the store the
// controllers use (tombstone included) and checks that what the CLI reads
// back prints exactly the golden outputs of the pure tests.
func TestStoreRoundTripGolden(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	clock := now
	st := newStore(t, ctx, func() time.Time { return clock })
	fx := fixtureClaims()
	for _, c := range fx {
		nc := c.DeepCopy()
		if err := st.CreateNodeClaim(ctx, nc); err != nil {
			t.Fatal(err)
		}
		if c.Tombstoned() {
			clock = c.DeletedAt
			if err := st.DeleteNodeClaim(ctx, nc); err != nil {
				t.Fatal(err)
			}
			clock = now
		}
	}
	snap := fixturePrices(t).Snapshot
	if err := (awsstore.Prices{Store: st}).SavePrices(ctx, snap); err != nil {
		t.Fatal(err)
	}
	prices, err := LoadPrices(ctx, st, "us-west-2")
	if err != nil {
		t.Fatal(err)
	}
	if prices.Snapshot == nil || prices.Catalog == nil {
		t.Fatalf("prices not loaded: %+v", prices)
	}

	all, err := LoadClaims(ctx, st, "", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range all {
		// The fixtures carry no resourceVersion; the store's is checked here.
		if want := map[bool]string{false: "1", true: "2"}[c.Tombstoned()]; c.ResourceVersion != want {
			t.Errorf("%s: resourceVersion %q", c.Name, c.ResourceVersion)
		}
		c.ResourceVersion = ""
	}
	var b bytes.Buffer
	if err := WriteNodeClaims(&b, all, PrintOptions{Output: OutputWide}, prices, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "nodeclaims-wide", b.Bytes())
	b.Reset()
	if err := WriteNodeClaims(&b, all, PrintOptions{Output: OutputJSON}, prices, now); err != nil {
		t.Fatal(err)
	}
	golden(t, "nodeclaims-json", b.Bytes())

	live, err := LoadClaims(ctx, st, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(live) != len(fx)-1 {
		t.Errorf("live claims: %d, want %d", len(live), len(fx)-1)
	}
	b.Reset()
	if err := WriteNodePools(&b, Usage(fixtureConfig(t), live, prices), PrintOptions{}); err != nil {
		t.Fatal(err)
	}
	golden(t, "nodepools", b.Bytes())

	pool, err := LoadClaims(ctx, st, "gpu", false)
	if err != nil || len(pool) != 1 || pool[0].Name != "gpu-j7k8l" {
		t.Errorf("--nodepool gpu: %v %d", err, len(pool))
	}

	for _, name := range []string{"default-d3e4f", "batch-m9n0p"} {
		c, err := LoadClaim(ctx, st, name)
		if err != nil {
			t.Fatal(err)
		}
		b.Reset()
		if err := WriteDescribe(&b, c, prices, now); err != nil {
			t.Fatal(err)
		}
		golden(t, "describe-"+name, b.Bytes())
	}
	if _, err := LoadClaim(ctx, st, "nope"); !errors.Is(err, ErrClaimNotFound) {
		t.Errorf("missing claim: %v", err)
	}
}
