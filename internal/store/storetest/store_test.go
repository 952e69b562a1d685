package storetest_test

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store/storetest"
)

// The fake keeps the contract internal/store's contract_test.go holds the
// DynamoDB store to.
func TestContract(t *testing.T) {
	storetest.RunContract(t, func(_ *testing.T, now func() time.Time) storetest.Repository {
		return storetest.New(storetest.WithClock(now))
	})
}

func TestSeedClaimAndObserver(t *testing.T) {
	var calls []string
	s := storetest.New(storetest.WithObserver(func(m string) { calls = append(calls, m) }))
	seeded := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	versioned := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "b", ResourceVersion: "4"}}
	s.Seed(seeded, versioned)
	if seeded.ResourceVersion != "" {
		t.Fatal("Seed changed its argument")
	}
	if a, b := s.Claim("a"), s.Claim("b"); a.ResourceVersion != "1" || b.ResourceVersion != "4" {
		t.Fatalf("seeded versions %q %q, want 1 and 4", a.ResourceVersion, b.ResourceVersion)
	}
	s.Claim("a").Labels = map[string]string{"x": "y"}
	if s.Claim("a").Labels != nil || s.Claim("missing") != nil {
		t.Fatal("Claim returned stored state or a missing claim")
	}
	ctx := context.Background()
	b, err := s.GetNodeClaim(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNodeClaim(ctx, b); err != nil {
		t.Fatal(err)
	}
	if s.Claim("b") != nil {
		t.Fatal("Claim returned a tombstone")
	}
	if want := []string{"GetNodeClaim", "DeleteNodeClaim"}; !slices.Equal(calls, want) {
		t.Fatalf("observed %v, want %v", calls, want)
	}
}
