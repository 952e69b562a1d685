package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store/storetest"
)

// delete nodeclaim marks the claim as termination.Mark does (the lifecycle
// drains it from there), says so kubectl's way, and with --wait returns
// once the claim is tombstoned.
func TestDeleteNodeClaimMarksAndWaits(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st := storetest.New()
	for _, name := range []string{"default-a", "default-b"} {
		cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.Now()}}
		if err := st.CreateNodeClaim(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	o := deleteOptions{wait: false, timeout: time.Second, interval: 10 * time.Millisecond}
	if err := runDeleteNodeClaims(ctx, &out, st, []string{"default-a"}, o, time.Now); err != nil {
		t.Fatal(err)
	}
	cl, err := st.GetNodeClaim(ctx, "default-a")
	if err != nil || !cl.Deleting() || cl.DeletionReason() != apis.DeletionReasonManual {
		t.Fatalf("claim not marked for a manual deletion: %+v %v", cl, err)
	}
	if b, _ := st.GetNodeClaim(ctx, "default-b"); b.Deleting() {
		t.Fatal("the other claim was marked too")
	}
	if err := runDeleteNodeClaims(ctx, &out, st, []string{"default-a"}, o, time.Now); err != nil {
		t.Fatal(err)
	}
	if want := "nodeclaim.karpenter.sh \"default-a\" deleted\nnodeclaim.karpenter.sh \"default-a\" already being deleted\n"; out.String() != want {
		t.Errorf("output %q, want %q", out.String(), want)
	}
	if err := runDeleteNodeClaims(ctx, &out, st, []string{"nope"}, o, time.Now); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing claim: %v", err)
	}

	// --wait: times out while the claim drains, returns once it is gone.
	o.wait = true
	if err := runDeleteNodeClaims(ctx, &out, st, []string{"default-a"}, o, time.Now); err == nil || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("wait on a claim still there: %v", err)
	}
	o.timeout = 5 * time.Second
	go func() {
		time.Sleep(100 * time.Millisecond)
		cl, _ := st.GetNodeClaim(ctx, "default-a")
		_ = st.DeleteNodeClaim(ctx, cl)
	}()
	if err := runDeleteNodeClaims(ctx, &out, st, []string{"default-a"}, o, time.Now); err != nil {
		t.Fatalf("wait after the lifecycle tombstoned the claim: %v", err)
	}
}
