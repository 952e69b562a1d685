package apis

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestMarkForDeletionKeepsFirstMark(t *testing.T) {
	nc := &NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc"}}
	if nc.Deleting() || nc.DeletionReason() != "" {
		t.Fatal("fresh claim reported as deleting")
	}
	if _, ok := nc.TerminationDeadline(); ok {
		t.Fatal("deadline without a mark")
	}
	t0 := metav1.NewTime(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	if !nc.MarkForDeletion(DeletionReasonExpired, "expireAfter elapsed", t0) {
		t.Fatal("first mark not reported as new")
	}
	if !nc.Deleting() || nc.DeletionReason() != DeletionReasonExpired || !nc.DeletionTimestamp.Equal(&t0) {
		t.Fatalf("mark: %+v reason %q", nc.DeletionTimestamp, nc.DeletionReason())
	}
	if _, ok := nc.TerminationDeadline(); ok {
		t.Fatal("deadline without terminationGracePeriod")
	}
	// A second decision (another controller) changes neither time nor reason:
	// the grace period counts from the first.
	t1 := metav1.NewTime(t0.Add(time.Hour))
	if nc.MarkForDeletion(DeletionReasonEmpty, "empty", t1) {
		t.Fatal("second mark reported as new")
	}
	if !nc.DeletionTimestamp.Equal(&t0) || nc.DeletionReason() != DeletionReasonExpired {
		t.Fatalf("second mark moved the first: %v %q", nc.DeletionTimestamp, nc.DeletionReason())
	}
	nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: 10 * time.Minute}
	if d, ok := nc.TerminationDeadline(); !ok || !d.Equal(t0.Add(10*time.Minute)) {
		t.Fatalf("deadline %v %v", d, ok)
	}
	// The mark survives the store's JSON encoding.
	back, b := jsonRoundTrip(t, nc)
	if !back.Deleting() || back.DeletionReason() != DeletionReasonExpired || !back.DeletionTimestamp.Equal(&t0) {
		t.Fatalf("round trip lost the mark: %s", b)
	}
}
