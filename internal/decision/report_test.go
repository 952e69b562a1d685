package decision

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/browsertest"
	"github.com/nodewright/nodewright/internal/store"
)

var t0 = time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)

type memWriter struct{ ds []store.Decision }

func (m *memWriter) PutDecision(_ context.Context, d store.Decision) error {
	m.ds = append(m.ds, d)
	return nil
}

// fixture: two provisioning passes planning for the same pods (one of which
// Karpenter then scheduled), three fleet passes, one opportunity seen
// twice, one blocked node and one configuration warning.
func fixture(t *testing.T) Records {
	t.Helper()
	w := &memWriter{}
	put := func(kind string, at time.Time, v any) {
		if err := Put(context.Background(), w, kind, "x", at, v); err != nil {
			t.Fatal(err)
		}
	}
	claim := Claim{Node: Node{Name: "default-abc", NodePool: "default", InstanceType: "m5.xlarge", Zone: "us-east-1a", CapacityType: "spot", Price: 0.0712},
		Pods: []string{"work/big-0", "work/big-1"}}
	put(KindLaunch, t0.Add(-50*time.Minute), Launch{At: t0.Add(-50 * time.Minute), DecisionSeconds: 0.4, Claims: []Claim{claim},
		Pending: []Pod{{Pod: "work/big-0", Seconds: 20}, {Pod: "work/big-1", Seconds: 20}}})
	put(KindLaunch, t0.Add(-49*time.Minute), Launch{At: t0.Add(-49 * time.Minute), DecisionSeconds: 0.2, Claims: []Claim{claim},
		Pending: []Pod{{Pod: "work/big-0", Seconds: 80}, {Pod: "work/big-1", Seconds: 80}}})
	opp := &Opportunity{Method: "single-node-consolidation", Action: "replace", Nodes: []Node{{Name: "karp-1", Owner: "karpenter", InstanceType: "m5.2xlarge", Price: 0.384}},
		Replacements: []Node{{InstanceType: "m5.large", CapacityType: "on-demand", Price: 0.096}}, SavingsPerHr: 0.288}
	for i, f := range []Fleet{
		{CostPerHour: 0.864, PlanCostPerHour: 0.5, Opportunity: opp},
		{CostPerHour: 0.864, PlanCostPerHour: 0.5, Opportunity: opp, Scheduled: []Pod{{Pod: "work/big-0", Seconds: 95}}},
		{CostPerHour: 0.96, PlanCostPerHour: 0.6, Blocked: []Blocked{{Node: "mng-1", Reason: "Cannot disrupt Node: pod work/db has a PodDisruptionBudget"}},
			NotHonoured: []string{"default.yaml:12: spec.disruption.budgets[0].reasons: not honoured"}},
	} {
		f.At = t0.Add(time.Duration(i-3) * 10 * time.Minute)
		put(KindFleet, f.At, f)
	}
	r, err := Decode(w.ds)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSummarize(t *testing.T) {
	rep := Summarize(fixture(t), t0.Add(-time.Hour), t0)
	l := rep.Latency
	if l.Pods != 2 || l.Scheduled != 1 || l.Observed.Max != 95 || l.StillPending != 1 || l.LongestPending != 80 || l.Decision.Max != 0.4 {
		t.Errorf("latency: %+v", l)
	}
	if rep.Cost.ActualPerHour != 0.96 || rep.Cost.PlanPerHour != 0.6 || len(rep.Cost.Series) != 3 {
		t.Errorf("cost: %+v", rep.Cost)
	}
	if len(rep.WouldLaunch) != 1 || rep.WouldLaunchTotal != 2 {
		t.Errorf("would launch: %+v (%d)", rep.WouldLaunch, rep.WouldLaunchTotal)
	}
	if len(rep.Opportunities) != 1 || rep.Opportunities[0].Times != 2 || rep.Opportunities[0].Item.SavingsPerHr != 0.288 {
		t.Errorf("opportunities: %+v", rep.Opportunities)
	}
	if len(rep.Blocked) != 1 || len(rep.NotHonoured) != 1 {
		t.Errorf("blocked %+v, not honoured %v", rep.Blocked, rep.NotHonoured)
	}
}

func TestWriteTableAndJSON(t *testing.T) {
	rep := Summarize(fixture(t), t0.Add(-time.Hour), t0)
	var b bytes.Buffer
	if err := WriteTable(&b, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"default-abc", "m5.xlarge", "spot", "work/big-0,work/big-1", "karp-1 (karpenter, m5.2xlarge 0.3840)", "0.2880",
		"mng-1", "PodDisruptionBudget", "not honoured", "fleet now", "0.9600"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := WriteJSON(&b, rep); err != nil || !strings.Contains(b.String(), `"savingsPerHour": 0.288`) {
		t.Errorf("json: %v\n%s", err, b.String())
	}
}

// The page renders in a real headless Chromium: its DOM has the plan's
// claim and the opportunity, escaped, and the screenshot shows both lines
// of the chart.
func TestWriteHTMLInChromium(t *testing.T) {
	browser := browsertest.Browser(t)
	r := fixture(t)
	r.Launches[1].Claims[0].Pods = append(r.Launches[1].Claims[0].Pods, "work/<script>")
	var b bytes.Buffer
	if err := WriteHTML(&b, Summarize(r, t0.Add(-time.Hour), t0)); err != nil {
		t.Fatal(err)
	}
	page := browsertest.Open(t, browser, b.Bytes())
	dom := page.DOM()
	if bytes.Count(dom, []byte(`class="claim"`)) != 1 || bytes.Count(dom, []byte(`class="opportunity"`)) != 1 ||
		!bytes.Contains(dom, []byte("&lt;script&gt;")) || !bytes.Contains(dom, []byte("<polyline")) {
		t.Errorf("chromium's DOM lacks the claim, the opportunity, the chart or the escaping:\n%s", dom)
	}
	counts := page.Colours(1000, 800)
	for _, colour := range []string{string(actualColour), string(planColour)} {
		if counts[colour] < 300 {
			t.Errorf("screenshot has %d pixels of %s, want a line's worth (>= 300)", counts[colour], colour)
		}
	}
}
