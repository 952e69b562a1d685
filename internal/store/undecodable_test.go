package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodewright/nodewright/internal/store"
)

// TestListSkipsUndecodableClaims: a claim record that cannot be decoded
// (written by a newer version before a rollback, or damaged) is skipped and
// reported with its key; the other claims are still listed, so one bad
// record does not stop every function. ListNodeClaimsReport names it so
// garbage collection can treat it as unknown.
func TestListSkipsUndecodableClaims(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	var reported []store.Undecodable
	s := e.store(t, store.WithUndecodable(func(_ context.Context, u store.Undecodable) {
		mu.Lock()
		defer mu.Unlock()
		reported = append(reported, u)
	}))
	for _, n := range []string{"default-good1", "default-bad1"} {
		if err := s.CreateNodeClaim(e.ctx, claim(n, "default", "")); err != nil {
			t.Fatal(err)
		}
	}
	damage(t, e, "default-bad1")

	got, err := s.ListNodeClaims(e.ctx)
	if err != nil {
		t.Fatalf("one bad record failed the whole listing: %v", err)
	}
	if len(got) != 1 || got[0].Name != "default-good1" {
		t.Fatalf("listed %d claims, want only default-good1", len(got))
	}
	byPool, err := s.ListNodeClaimsByNodePool(e.ctx, "default")
	if err != nil || len(byPool) != 1 {
		t.Fatalf("by nodepool: %d claims, %v", len(byPool), err)
	}
	live, skipped, err := s.ListNodeClaimsReport(e.ctx)
	if err != nil || len(live) != 1 || len(skipped) != 1 || skipped[0].Name != "default-bad1" || skipped[0].Err == nil {
		t.Fatalf("report: live %d, skipped %+v, %v", len(live), skipped, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) == 0 || reported[0].Name != "default-bad1" || reported[0].Key == "" {
		t.Errorf("not reported: %+v", reported)
	}
}

// damage overwrites the body of claim name's record with bytes that are
// not gzip.
func damage(t *testing.T, e *env, name string) {
	t.Helper()
	out, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String(e.table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range out.Items {
		if sk, ok := it[store.AttrSK].(*types.AttributeValueMemberS); ok && sk.Value == name {
			it["body"] = &types.AttributeValueMemberB{Value: []byte("not gzip")}
			if _, err := e.db.PutItem(e.ctx, &dynamodb.PutItemInput{TableName: aws.String(e.table), Item: it}); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatalf("no record of %s", name)
}
