package interruption_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/store"
)

// Malformed messages reach the DLQ after maxReceiveCount receives, each
// reported with its message ID; messages for instances nodewright does not
// own are acknowledged and touch nothing.
func TestMalformedToDLQAndUnownedUntouched(t *testing.T) {
	h := newHarness(t)
	// A node nodewright does not own (no claim in this table).
	foreign := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "foreign-" + h.pool, Labels: map[string]string{"nodewright.io/test": h.pool}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + h.cloud.Region + "a/i-0f0f0f0f0f0f0f0f0"},
	}
	if _, err := h.cloud.KubeClient.CoreV1().Nodes().Create(h.ctx, foreign, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = h.cloud.KubeClient.CoreV1().Nodes().Delete(context.Background(), foreign.Name, metav1.DeleteOptions{})
	})
	start := time.Now()
	malformedID, err := h.sim.SQS().Send(h.qName, `{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{}}`, 0)
	if err != nil {
		t.Fatal(err)
	}
	notJSONID, err := h.sim.SQS().Send(h.qName, `not json at all`, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, body := range []string{
		spotWarning("foreign-1", "i-0f0f0f0f0f0f0f0f0", h.cloud.Region),
		`{"version":"0","id":"foreign-2","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0f0f0f0f0f0f0f0f0","state":"terminated"}}`,
		`{"version":"0","id":"foreign-3","detail-type":"AWS Health Event","source":"aws.health","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-0f0f0f0f0f0f0f0f0"}]}}`,
	} {
		if _, err := h.sim.SQS().Send(h.qName, body, 0); err != nil {
			t.Fatal(err)
		}
	}
	h.eventually("malformed messages in the DLQ, queue drained", 60*time.Second, func() (bool, string) {
		if ok, why := h.queueEmpty(); !ok {
			return false, why
		}
		return h.dlqDepth() == 2, fmt.Sprintf("DLQ depth %d", h.dlqDepth())
	})
	// Each malformed message was tried maxReceiveCount times, not more.
	for _, id := range []string{malformedID, notJSONID} {
		tries := 0
		h.mu.Lock()
		for _, b := range h.batches {
			for _, r := range b.records {
				if r.MessageId == id {
					tries++
					if !slices.ContainsFunc(b.resp.BatchItemFailures, func(f events.SQSBatchItemFailure) bool { return f.ItemIdentifier == id }) {
						t.Errorf("malformed message %s not reported as a batch item failure", id)
					}
				}
			}
		}
		h.mu.Unlock()
		if tries != maxReceiveCount {
			t.Errorf("malformed message %s handled %d times, want %d", id, tries, maxReceiveCount)
		}
		if !strings.Contains(h.logs.String(), `"message-id":"`+id+`"`) {
			t.Errorf("no log line names malformed message %s", id)
		}
	}
	// Unowned: acknowledged at once, nothing touched.
	n, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, foreign.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("foreign node: %v", err)
	}
	if n.Spec.Unschedulable || len(n.Spec.Taints) != 0 {
		t.Errorf("foreign node touched: unschedulable=%v taints=%v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	if c := h.fleetCallsSince(start); len(c) != 0 {
		t.Errorf("%d CreateFleet calls for unowned instances", len(c))
	}
	if c := h.sim.Calls("ec2", "TerminateInstances"); slices.ContainsFunc(c, func(c awssim.Call) bool { return !c.Time.Before(start) }) {
		t.Errorf("TerminateInstances called for an unowned instance")
	}
	if off, err := h.store.UnavailableOfferings(h.ctx); err != nil || len(off) != 0 {
		t.Errorf("ICE set changed for an unowned instance: %v %v", off, err)
	}
	for _, id := range []string{"foreign-1", "foreign-2", "foreign-3"} {
		for _, b := range h.handled(`"` + id + `"`) {
			for _, r := range b.records {
				if strings.Contains(r.Body, id) && slices.ContainsFunc(b.resp.BatchItemFailures, func(f events.SQSBatchItemFailure) bool { return f.ItemIdentifier == r.MessageId }) {
					t.Errorf("unowned message %s reported as a failure", id)
				}
			}
		}
	}
}

// Rebalance recommendations: under ignore (the default) acknowledged with
// an event only; under replace the replacement is launched first, then the
// node drained.
func TestRebalanceIgnoreThenReplace(t *testing.T) {
	h := newHarness(t)
	cl, node := h.deploy(3, 2)
	start := time.Now()
	if err := h.sim.RecommendRebalance(cl.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	h.eventually("rebalance handled (ignore)", 30*time.Second, func() (bool, string) {
		return len(h.handled("EC2 Instance Rebalance Recommendation")) == 1, "not yet"
	})
	if ok, why := h.queueEmpty(); !ok {
		t.Errorf("ignored rebalance not acknowledged: %s", why)
	}
	n, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == apis.DisruptedTaintKey }) {
		t.Errorf("rebalance (ignore) touched the node: %v %v", n.Spec.Unschedulable, n.Spec.Taints)
	}
	cur, err := h.store.GetNodeClaim(h.ctx, cl.Name)
	if err != nil || cur.Deleting() || cur.IsTrue(apis.ConditionDisrupting) {
		t.Errorf("rebalance (ignore) changed the claim: %v deleting=%v", err, cur != nil && cur.Deleting())
	}
	if c := h.fleetCallsSince(start); len(c) != 0 {
		t.Errorf("rebalance (ignore) launched %d instances", len(c))
	}
	if got := h.nodeEvents(node.Name, interruption.ReasonRebalance); got != 1 {
		t.Errorf("%d rebalance events on the node, want 1", got)
	}

	// Switch the function to replace.
	h.setHandler(h.newApp(interruption.RebalanceReplace))
	start = time.Now()
	if err := h.sim.RecommendRebalance(cl.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	h.eventually("rebalance handled (replace)", 30*time.Second, func() (bool, string) {
		return len(h.handled("EC2 Instance Rebalance Recommendation")) == 2, "not yet"
	})
	fleets := h.fleetCallsSince(start)
	if len(fleets) != 1 {
		t.Fatalf("rebalance (replace): %d CreateFleet calls, want 1", len(fleets))
	}
	cur, err = h.store.GetNodeClaim(h.ctx, cl.Name)
	if err == nil {
		if !cur.Deleting() || cur.DeletionReason() != apis.DeletionReasonInterrupted {
			t.Errorf("rebalance (replace): claim not marked for deletion: %v", cur.DeletionTimestamp)
		}
		if cur.DeletionTimestamp.Time.Before(fleets[0].Time.Truncate(time.Second)) {
			t.Errorf("drain decided (%v) before the replacement was launched (%v)", cur.DeletionTimestamp, fleets[0].Time)
		}
	}
	h.waitRunningOn(3, node.Name)
	h.waitGone(cl, node.Name)
}

// An AWS Health scheduled change drains the instance onto a replacement
// (within the PDB); a "stopped" state change then removes the
// replacement's claim and Node at once (nothing left to drain), terminates
// the stopped instance and launches capacity for its pods.
func TestScheduledChangeDrainsThenStoppedCleansUp(t *testing.T) {
	h := newHarness(t)
	cl, node := h.deploy(2, 1)
	stopPDB := h.watchPDB()
	start := time.Now()
	if err := h.sim.ScheduleMaintenance(cl.Status.InstanceID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	h.eventually("scheduled change handled", 30*time.Second, func() (bool, string) {
		return len(h.handled("AWS Health Event")) == 1, "not yet"
	})
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Fatalf("%d replacement CreateFleet calls, want 1", n)
	}
	repl := h.waitRunningOn(2, node.Name)
	h.waitGone(cl, node.Name)
	if got := stopPDB(); got < 1 {
		t.Errorf("PDB violated: %d healthy pods at one point (minAvailable 1)", got)
	}
	if got := h.nodeEvents(node.Name, interruption.ReasonInstanceUnhealthy); got != 1 {
		t.Errorf("%d InstanceUnhealthy events, want 1", got)
	}

	claims, err := h.store.ListNodeClaims(h.ctx)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claims %d %v", len(claims), err)
	}
	rc := claims[0]
	start = time.Now()
	body := fmt.Sprintf(`{"version":"0","id":"stop-1","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","region":%q,"detail":{"instance-id":%q,"state":"stopped"}}`,
		h.cloud.Region, rc.Status.InstanceID)
	if _, err := h.sim.SQS().Send(h.qName, body, 0); err != nil {
		t.Fatal(err)
	}
	h.firstBatch("stopped handled", `"stop-1"`)
	// At once: when the handler returned, the claim and node were gone.
	if _, err := h.store.GetNodeClaim(h.ctx, rc.Name); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("claim of the stopped instance kept: %v", err)
	}
	if _, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, repl.Name, metav1.GetOptions{}); err == nil {
		t.Errorf("node of the stopped instance kept")
	}
	terminated := false
	for _, c := range h.sim.Calls("ec2", "TerminateInstances") {
		if !c.Time.Before(start) && c.ErrorCode == "" {
			for _, v := range c.Params {
				if v == rc.Status.InstanceID {
					terminated = true
				}
			}
		}
	}
	if !terminated {
		t.Errorf("stopped instance %s not terminated", rc.Status.InstanceID)
	}
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Errorf("%d CreateFleet calls for the stopped node's pods, want 1", n)
	}
	h.waitRunningOn(2, repl.Name)
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("pods of the stopped node took %s to run again", took)
	} else {
		t.Logf("pods of the stopped node running again after %s", took.Round(time.Millisecond))
	}
	if h.dlqDepth() != 0 {
		t.Errorf("DLQ has %d messages", h.dlqDepth())
	}
}
