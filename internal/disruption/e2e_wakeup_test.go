package disruption_test

import (
	"encoding/json"
	"path"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
)

// wakeupSchedule is the disruption schedule's period in the wake-up
// scenario: far longer than the test, so no tick can explain what happens.
const wakeupSchedule = 5 * time.Minute

// consolidateAfter shorter than the schedule is honoured: with the
// disruption function deployed behind its queue on a 5-minute schedule and
// a pool consolidating after 5 s, a node that empties is removed seconds
// after consolidateAfter runs out. After the one schedule tick the test
// gives, every pass comes from the wake-ups the function sends itself on
// the disruption queue (one when the node becomes eligible, one when the
// decision is due for validation), each running every check a tick would.
func TestWakeupHonoursConsolidateAfterShorterThanTheSchedule(t *testing.T) {
	e := newEnv(t, scenarioPool([]string{"m5.large"}, "WhenEmptyOrUnderutilized", "5s", budget("100%")), cloudtest.DisruptionQueue())
	fn, tick := startDisruptionFunction(e)
	e.deployment("web", 1, "500m", nil)
	e.launchAll("web")
	e.until("claim initialized", time.Minute, false, []string{"web"}, func() bool {
		cls := e.claims()
		return len(cls) == 1 && cls[0].IsTrue(apis.ConditionInitialized)
	}, nil)
	claim, node := e.claims()[0].Name, e.claims()[0].Status.NodeName
	// The lifecycle (stepped by the test as its schedule and queue would)
	// keeps the node's pod-event clock: it must have seen the pod before it
	// can see it leave.
	podSet := func() *apis.NodeClaim {
		cl, err := e.st.GetNodeClaim(e.ctx, claim)
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	e.until("pod seen by the lifecycle", time.Minute, false, nil, func() bool {
		list, err := e.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		var on []*corev1.Pod
		for i := range list.Items {
			on = append(on, &list.Items[i])
		}
		return len(on) == 1 && podSet().Annotations[lifecycle.AnnotationPodSet] == lifecycle.PodSetDigest(on)
	}, nil)

	emptied := time.Now()
	e.scale("web", 0)
	// It notices the pod leave and starts the consolidateAfter clock.
	var lastPodEvent time.Time
	e.until("pod event recorded", time.Minute, false, nil, func() bool {
		cl := podSet()
		lastPodEvent = cl.Status.LastPodEventTime.Time
		return cl.Annotations[lifecycle.AnnotationPodSet] == lifecycle.PodSetDigest(nil)
	}, nil)

	res := tick()
	t.Logf("tick %v after the pod event: wake-up at %v for %s (sent %v)", time.Since(lastPodEvent).Round(time.Millisecond),
		res.WakeAt.Sub(lastPodEvent).Round(time.Millisecond), res.WakeFor, res.WakeSent)
	if res.Executed || !res.WakeSent {
		t.Fatalf("the tick's pass: %+v; want it to wait for consolidateAfter or validation and send a wake-up", res)
	}
	e.until("empty node removed", 2*time.Minute, false, nil, func() bool { return len(e.claims()) == 0 }, nil)
	removed := time.Since(lastPodEvent)
	batches := fn.received()
	t.Logf("node emptied; pod event recorded %v later, claim gone %v after it; %d wake-up batches",
		lastPodEvent.Sub(emptied).Round(time.Millisecond), removed.Round(time.Millisecond), len(batches))
	// Only the disruption function removes empty nodes of this pool (the
	// lifecycle leaves WhenEmptyOrUnderutilized pools to it), and it ran on
	// the tick and the wake-ups alone: one for eligibility, one for
	// validation, never a pile.
	if len(e.nodeEvents(disruption.ReasonDisrupting)[node]) == 0 {
		t.Errorf("no %s event on node %s", disruption.ReasonDisrupting, node)
	}
	if len(batches) == 0 || len(batches) > 3 {
		t.Fatalf("%d wake-up batches reached the disruption function, want 1 to 3", len(batches))
	}
	for _, b := range batches {
		if b.err != nil || len(b.resp.BatchItemFailures) != 0 {
			t.Errorf("wake-up batch failed: %v %+v", b.err, b.resp)
		}
	}
	// consolidateAfter (5 s) + validation (2 s) + the passes, the drain and
	// the simulated shutdown; the schedule would have taken 5 minutes.
	if limit := 45 * time.Second; removed > limit {
		t.Errorf("empty node removed %v after its pod event, want within %v", removed, limit)
	}
}

// startDisruptionFunction deploys the disruption function as the stack
// does: its queue's event source mapping hands wake-ups to the real
// handler (built by the composition root, on a 5-minute schedule with a
// 2 s validation delay); tick runs the schedule's one pass.
func startDisruptionFunction(e *env) (fn *queueFunction, tick func() *disruption.Result) {
	e.t.Helper()
	t := e.t
	fn = &queueFunction{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("disruption function logs:\n%s", fn.logs.String())
		}
	})
	a := functionApp(e, "disruption", e.stack, &fn.logs, func(s *settings.Settings) {
		s.DisruptionQueueURL, s.DisruptionSchedule = e.disr, wakeupSchedule
	})
	d, err := a.DisruptionDeps()
	if err != nil {
		t.Fatal(err)
	}
	d.Settings.ValidationDelay = 2 * time.Second
	h, err := disruption.NewHandler(d)
	if err != nil {
		t.Fatal(err)
	}
	fn.serve(e, e.stack, path.Base(e.disr), e.disr, h.Handle)
	return fn, func() *disruption.Result {
		t.Helper()
		out, err := h.Handle(e.ctx, json.RawMessage(`{"detail-type":"Scheduled Event","source":"aws.events","detail":{}}`))
		if err != nil {
			t.Fatalf("disruption tick: %v", err)
		}
		res, ok := out.(*disruption.Result)
		if !ok {
			t.Fatalf("disruption tick returned %T", out)
		}
		return res
	}
}
