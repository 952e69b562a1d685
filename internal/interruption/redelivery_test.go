package interruption_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/termination"
)

// failOnce fails the first termination step, as a function killed between
// the replacement launch and the drain would leave things.
type failOnce struct {
	interruption.Terminator
	mu     sync.Mutex
	failed bool
}

func (f *failOnce) Step(ctx context.Context, cl *apis.NodeClaim) (termination.Result, error) {
	f.mu.Lock()
	first := !f.failed
	f.failed = true
	f.mu.Unlock()
	if first {
		return termination.Result{}, errors.New("injected: function killed before the drain")
	}
	return f.Terminator.Step(ctx, cl)
}

// A handling that dies after the replacement was launched but before the
// drain started is completed by the redelivery: still one replacement, one
// drain, the message acknowledged in the end (not in the DLQ).
func TestRedeliveryAfterFailureCompletesWithoutSecondLaunch(t *testing.T) {
	h := newHarness(t)
	cl, node := h.deploy(3, 2)
	d, err := h.app.InterruptionDeps()
	if err != nil {
		t.Fatal(err)
	}
	d.Terminator = &failOnce{Terminator: d.Terminator}
	hd, err := interruption.NewHandler(d)
	if err != nil {
		t.Fatal(err)
	}
	h.handler.Store(hd)
	start := time.Now()
	if err := h.sim.ReclaimSpot(cl.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	h.eventually("warning delivered twice (failure, then success)", 30*time.Second, func() (bool, string) {
		bs := h.handled("EC2 Spot Instance Interruption Warning")
		if len(bs) < 2 {
			return false, fmt.Sprintf("%d deliveries", len(bs))
		}
		if len(bs[0].resp.BatchItemFailures) != 1 || len(bs[1].resp.BatchItemFailures) != 0 {
			t.Fatalf("want a failure then a success, got %+v then %+v", bs[0].resp, bs[1].resp)
		}
		return true, ""
	})
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Errorf("%d replacement CreateFleet calls after the redelivery, want 1", n)
	}
	h.waitRunningOn(3, node.Name)
	h.waitGone(cl, node.Name)
	if n := len(h.fleetCallsSince(start)); n != 1 {
		t.Errorf("%d CreateFleet calls in all, want 1", n)
	}
	if got := h.nodeEvents(node.Name, "Disrupting"); got != 1 {
		t.Errorf("%d Disrupting events, want 1 drain", got)
	}
	h.eventually("queue drained", 10*time.Second, h.queueEmpty)
	if h.dlqDepth() != 0 {
		t.Errorf("DLQ has %d messages", h.dlqDepth())
	}
}
