package disruption_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/store"
)

// Scenario 1: 30 pods scaled down to 5 -> nodes consolidated, the cost
// drops, and the deployment never has more pods unavailable than its PDB
// allows.
func TestScenario1ScaleDownConsolidates(t *testing.T) {
	e := newEnv(t, scenarioPool([]string{"m5.large", "m5.xlarge"}, "WhenEmptyOrUnderutilized", "5s", budget("50%")))
	e.deployment("inflate", 30, "450m", int32p(1))
	start := time.Now()
	e.launchAll("inflate")
	costBefore, nodesBefore := e.cost()
	t.Logf("30 pods running on %d nodes ($%.3f/h) after %v", nodesBefore, costBefore, time.Since(start).Round(time.Second))

	e.scaleDown("inflate", 5)
	_, afterScale := e.cost()
	t1 := time.Now()
	fewest, stop := e.watchRunning("inflate")
	defer stop()
	quiet, seen, busy := 0, 0, time.Now()
	e.until("consolidation settles", 5*time.Minute, true, []string{"inflate"}, func() bool {
		// consolidateAfter (5 s) runs from the pod events the lifecycle
		// records on its 5 s ticks: a node whose pods last moved is not a
		// candidate until both have passed. So consolidation is done after
		// three passes in a row with nothing in progress and nothing
		// decided, the last of them more than those 10 s (and a margin)
		// after anything moved; on a loaded machine three quick passes can
		// all come before the last node becomes a candidate.
		if time.Since(t1) < 15*time.Second || !e.settled() {
			quiet, seen, busy = 0, len(e.results), time.Now()
			return false
		}
		for _, r := range e.results[seen:] {
			if r.Decided {
				quiet, busy = 0, time.Now()
			} else {
				quiet++
			}
		}
		seen = len(e.results)
		return quiet >= 3 && time.Since(busy) > 15*time.Second
	}, nil)
	minRunning := fewest()
	costAfter, nodesAfter := e.cost()
	t.Logf("scenario 1: %d nodes $%.3f/h -> %d nodes $%.3f/h in %v; fewest Running pods during consolidation %d (PDB maxUnavailable 1)",
		afterScale, costBefore, nodesAfter, costAfter, time.Since(t1).Round(time.Second), minRunning)
	if costAfter >= costBefore || nodesAfter >= nodesBefore {
		t.Errorf("no consolidation: %d nodes $%.3f/h -> %d nodes $%.3f/h", nodesBefore, costBefore, nodesAfter, costAfter)
	}
	if minRunning < 4 {
		t.Errorf("only %d of 5 pods Running at one point; the PDB allows 1 unavailable", minRunning)
	}
	if _, running, _ := e.pods("inflate"); running != 5 {
		t.Errorf("%d pods Running at the end, want 5", running)
	}
	disrupting := e.nodeEvents(disruption.ReasonDisrupting)
	explained := 0
	for node, msgs := range disrupting {
		for _, m := range msgs {
			if strings.Contains(m, "saves $") || strings.HasPrefix(m, "Emptiness") {
				explained++
				t.Logf("event on %s: %s", node, m)
			}
		}
	}
	if explained == 0 {
		t.Error("no Disrupting event explains a consolidation")
	}
	// Stable: nothing more to do.
	res, err := e.dis.Run(e.ctx)
	if err != nil || res.Decided {
		t.Errorf("consolidated cluster not stable: %+v %v", res, err)
	}
}

// Scenario 2: a new AMI release -> every node is replaced, never more than
// the budget (1 node) at a time, pods Running throughout.
func TestScenario2AMIDriftReplacesEveryNode(t *testing.T) {
	e := newEnv(t, scenarioPool([]string{"m5.large"}, "WhenEmptyOrUnderutilized", "Never", budget("1")))
	e.deployment("web", 3, "1200m", int32p(1))
	e.launchAll("web")
	before := e.claims()
	oldAMI := map[string]bool{}
	for _, cl := range before {
		oldAMI[cl.Status.ImageID] = true
	}
	if len(before) != 3 {
		t.Fatalf("%d nodes for 3 pods of 1.2 CPU on m5.large", len(before))
	}
	imgs, err := e.cloud.AWS.EC2().PublishAMI("al2023")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("published %d new AMIs; nodes run %v", len(imgs), oldAMI)
	t1 := time.Now()
	fewest, stop := e.watchRunning("web")
	defer stop()
	maxBusy := 0
	e.until("every node replaced", 6*time.Minute, true, []string{"web"}, func() bool {
		cls := e.claims()
		if len(cls) != 3 || !e.settled() {
			return false
		}
		for _, cl := range cls {
			if oldAMI[cl.Status.ImageID] || !cl.IsTrue(apis.ConditionInitialized) {
				return false
			}
		}
		_, running, _ := e.pods("web")
		return running == 3
	}, func() {
		del, dis := e.busy()
		maxBusy = max(maxBusy, del+dis)
	})
	minRunning := fewest()
	t.Logf("scenario 2: 3 nodes replaced in %v; at most %d disrupted at once; fewest Running pods %d", time.Since(t1).Round(time.Second), maxBusy, minRunning)
	if maxBusy > 1 {
		t.Errorf("%d nodes disrupted at once; the budget allows 1", maxBusy)
	}
	if minRunning < 2 {
		t.Errorf("only %d of 3 pods Running at one point (PDB maxUnavailable 1)", minRunning)
	}
	for _, cl := range before {
		ts, err := e.st.GetTombstone(e.ctx, cl.Name)
		if err != nil || ts.Claim.DeletionReason() != apis.DeletionReasonDrifted {
			t.Errorf("old claim %s: tombstone %+v %v", cl.Name, ts, err)
		}
	}
}

// Scenario 4: a PDB with maxUnavailable 0 -> consolidation never drains its
// node and says why in an event; without the PDB the same node is replaced
// (so the protection, not a lack of savings, is what held it).
func TestScenario4PDBBlocksConsolidation(t *testing.T) {
	e := newEnv(t, scenarioPool([]string{"m5.large", "m5.xlarge", "m5.2xlarge"}, "WhenEmptyOrUnderutilized", "5s", budget("100%")))
	e.deployment("guarded", 1, "500m", int32p(0))
	e.deployment("filler", 6, "1", nil)
	e.launchAll("guarded", "filler")
	e.scaleDown("filler", 0)
	list, err := e.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=guarded"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("guarded pod: %v %v", list, err)
	}
	node := list.Items[0].Spec.NodeName
	var claim string
	for _, cl := range e.claims() {
		if cl.Status.NodeName == node {
			claim = cl.Name
		}
	}
	t.Logf("guarded pod on node %s (claim %s)", node, claim)
	e.passes("passes over the protected node", 40*time.Second, []string{"guarded"}, func() {
		cl, err := e.st.GetNodeClaim(e.ctx, claim)
		if err != nil {
			t.Fatalf("claim %s: %v", claim, err)
		}
		if cl.Deleting() || cl.IsTrue(apis.ConditionDisrupting) {
			t.Fatalf("node %s protected by a PDB with maxUnavailable 0 was disrupted", node)
		}
	})
	var why string
	for _, m := range e.nodeEvents(disruption.ReasonBlocked)[node] {
		if strings.Contains(m, "PodDisruptionBudget") {
			why = m
		}
	}
	if why == "" {
		t.Fatalf("no DisruptionBlocked event naming the PDB on node %s: %v", node, e.nodeEvents(disruption.ReasonBlocked)[node])
	}
	t.Logf("event: %s", why)

	// Lift the PDB: now the same node is consolidated (unless it already is
	// the cheapest type and alone, when there is nothing to save).
	if cl, err := e.st.GetNodeClaim(e.ctx, claim); err == nil && cl.Labels[catalog.LabelInstanceType] == "m5.large" && len(e.claims()) == 1 {
		t.Logf("guarded node is a lone m5.large: nothing to consolidate without the PDB either")
		return
	}
	if err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Delete(e.ctx, "guarded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.until("node consolidated once the PDB is gone", 3*time.Minute, true, []string{"guarded"}, func() bool {
		_, err := e.st.GetNodeClaim(e.ctx, claim)
		return errors.Is(err, store.ErrNotFound)
	}, nil)
}

// Scenario 5: a budget of 0 nodes with a schedule covering now -> no
// voluntary disruption at all, and the budget is named in events.
func TestScenario5ZeroBudgetBlocksEverything(t *testing.T) {
	e := newEnv(t, scenarioPool([]string{"m5.large", "m5.xlarge", "m5.2xlarge"}, "WhenEmptyOrUnderutilized", "5s",
		budget("100%"), noneEver))
	e.deployment("filler", 8, "1", nil)
	e.launchAll("filler")
	before := e.claims()
	e.scaleDown("filler", 1)
	e.passes("passes under a zero budget", 30*time.Second, []string{"filler"}, func() {
		if del, dis := e.busy(); del+dis > 0 {
			t.Fatalf("%d nodes deleting, %d disrupting under a zero budget", del, dis)
		}
	})
	if len(e.claims()) != len(before) {
		t.Fatalf("%d claims before, %d after", len(before), len(e.claims()))
	}
	blocked := 0
	for _, msgs := range e.nodeEvents(disruption.ReasonBlocked) {
		for _, m := range msgs {
			if strings.Contains(m, "no disruption budget") && strings.Contains(m, e.pool) {
				blocked++
			}
		}
	}
	if blocked == 0 {
		t.Fatal("no DisruptionBlocked event names the budget")
	}
	decided := 0
	for _, r := range e.results {
		if r.Decided {
			decided++
		}
	}
	if decided > 0 {
		t.Fatalf("%d commands decided under a zero budget", decided)
	}
	t.Logf("scenario 5: %d nodes kept over %d passes; %d budget events", len(before), len(e.results), blocked)
}
