package disruption

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// Settings tune disruption; zero values take the defaults.
type Settings struct {
	// Policy is the planning policy its simulations use (see
	// scheduling.Policy; Karpenter's disruption uses the same options).
	Policy scheduling.Policy
	// ValidationDelay is how long a decision waits before it is validated
	// again and acted on (Karpenter: 15 s; negative: at once).
	ValidationDelay time.Duration
	// ReplacementTimeout: replacements not initialized this long after they
	// were requested make the command roll back (default 15 min).
	ReplacementTimeout time.Duration
	// MultiNodeMaxCandidates bounds multi-node consolidation (100).
	MultiNodeMaxCandidates int
	// MultiNodeTimeout and SingleNodeTimeout bound the searches (1 min, 3 min).
	MultiNodeTimeout  time.Duration
	SingleNodeTimeout time.Duration
	// SpotToSpotConsolidation lets consolidation replace spot nodes by a
	// spot node (Karpenter's feature gate of that name, off by default).
	SpotToSpotConsolidation bool
	// SpotToSpotMinTypes: when it is on, a spot node is replaced by a spot
	// node only when at least this many cheaper spot types fit (15).
	SpotToSpotMinTypes int
	// RepackMinSavingsFraction and RepackMinSavings: the re-pack check acts
	// only when the ideal plan is cheaper by more than both (10 %, $0.05/h).
	RepackMinSavingsFraction float64
	RepackMinSavings         float64
	// DisableRepack turns the re-pack check off.
	DisableRepack bool
	// FlipFlopWindow: nodes that replaced nodes of type T within this
	// window are never replaced by T again (default 1 h).
	FlipFlopWindow time.Duration
	// LeaseDuration is the disruption lease's length (6 min: longer than
	// the function's 5-minute timeout, so a pass never outlives its lease
	// and no renewal is needed).
	LeaseDuration time.Duration
	// MaxEvents caps the Kubernetes events one pass emits (100).
	MaxEvents int
	// SchedulePeriod is how often the schedule runs a pass (1 min): a
	// candidate becoming eligible, or a decision due for validation,
	// sooner than that gets a wake-up message (Deps.Wakeup).
	SchedulePeriod time.Duration
}

// Defaults fills zero values.
func (s *Settings) Defaults() {
	// Negative means "validate at once" and is kept, so Defaults can be
	// applied more than once.
	if s.ValidationDelay == 0 {
		s.ValidationDelay = 15 * time.Second
	}
	basedeps.Default(&s.ReplacementTimeout, 15*time.Minute)
	basedeps.Default(&s.MultiNodeTimeout, time.Minute)
	basedeps.Default(&s.SingleNodeTimeout, 3*time.Minute)
	basedeps.Default(&s.FlipFlopWindow, time.Hour)
	basedeps.Default(&s.LeaseDuration, 6*time.Minute)
	basedeps.Default(&s.MultiNodeMaxCandidates, 100)
	basedeps.Default(&s.SpotToSpotMinTypes, 15)
	basedeps.Default(&s.RepackMinSavingsFraction, 0.10)
	basedeps.Default(&s.RepackMinSavings, 0.05)
	basedeps.Default(&s.MaxEvents, 100)
	basedeps.Default(&s.SchedulePeriod, time.Minute)
}

// Finding is something a decision wants people to know about a node
// (an Unconsolidatable or DisruptionBlocked event).
type Finding struct {
	Node   string
	Reason string // event reason
	Text   string
}

// Decision is the outcome of Decide.
type Decision struct {
	Command *Command
	// Eligible counts candidates per method.
	Eligible map[string]int
	Findings []Finding
	// NextEligible is when the first candidate still inside its
	// consolidateAfter becomes eligible (zero when none is), and
	// NextEligibleNode names it (NextEligible).
	NextEligible     time.Time
	NextEligibleNode string

	screen *screen // the pass's (screenFor)
}

// Decide runs the methods in Karpenter's order — emptiness, static drift,
// drift, multi-node consolidation, single-node consolidation — and then the
// re-pack check; the first that produces a command wins.
func Decide(ctx context.Context, v *View) (*Decision, error) {
	v.Settings.Defaults()
	cands, blocked, err := Candidates(ctx, v)
	if err != nil {
		return nil, err
	}
	budgets, err := ComputeBudgets(v.Cluster, v.Now)
	if err != nil {
		return nil, err
	}
	d := &Decision{Eligible: map[string]int{}}
	d.NextEligible, d.NextEligibleNode = NextEligible(cands, v.Now)
	for _, b := range blocked {
		if b.Voluntary && b.Node != nil {
			d.Findings = append(d.Findings, Finding{Node: b.Node.Name, Reason: ReasonBlocked, Text: "Cannot disrupt Node: " + b.Reason})
		}
	}
	steps := []func(context.Context, *View, []*Candidate, Budgets, *Decision) (*Command, error){
		emptiness, staticDrift, drift, multiNode, singleNode, repack,
	}
	defer func() { d.screen = nil }() // the pass's, not the decision's to keep
	for _, step := range steps {
		cmd, err := step(ctx, v, cands, budgets, d)
		if err != nil {
			return d, err
		}
		if cmd != nil {
			cmd.ValidateAfter = v.Now.Add(max(v.Settings.ValidationDelay, 0))
			d.Command = cmd
			return d, nil
		}
	}
	return d, nil
}

// withinBudget keeps candidates (in order) while each pool's budget for
// reason lasts; the others get a DisruptionBlocked finding.
func withinBudget(cands []*Candidate, b Budgets, reason apis.DisruptionReason, d *Decision) []*Candidate {
	used := map[string]int{}
	var out []*Candidate
	for _, c := range cands {
		pool := c.NodePool.Name
		if used[pool] >= b.Allowed(pool, reason) {
			if d != nil {
				d.Findings = append(d.Findings, Finding{Node: c.Name(), Reason: ReasonBlocked,
					Text: fmt.Sprintf("Cannot disrupt Node: NodePool %q has no disruption budget left for reason %s", pool, reason)})
			}
			continue
		}
		used[pool]++
		out = append(out, c)
	}
	return out
}

// emptiness deletes every empty node whose pool consolidates and whose
// consolidateAfter has passed, within budgets (lifecycle.EmptyCandidate's
// rule; the lifecycle itself only acts on WhenEmpty pools, and a node it
// marks first is simply no longer a candidate here).
func emptiness(_ context.Context, v *View, cands []*Candidate, b Budgets, d *Decision) (*Command, error) {
	var empty []*Candidate
	for _, c := range cands {
		if c.Empty && c.EmptyEligible {
			empty = append(empty, c)
		}
	}
	d.Eligible[MethodEmptiness] = len(empty)
	sortBySavings(empty)
	empty = withinBudget(empty, b, apis.DisruptionReasonEmpty, d)
	if len(empty) == 0 {
		return nil, nil
	}
	return newCommand(MethodEmptiness, apis.DisruptionReasonEmpty, "", empty, Simulation{Schedulable: true}, v.Now), nil
}

// drift replaces drifted nodes of dynamic pools (staticDrift takes the
// static pools'), oldest first, as many as the budgets allow at once; their
// pods must have somewhere to go (existing room or new nodes of any price).
func drift(ctx context.Context, v *View, cands []*Candidate, b Budgets, d *Decision) (*Command, error) {
	var drifted []*Candidate
	for _, c := range cands {
		if c.Drift != "" && !c.NodePool.Static() {
			drifted = append(drifted, c)
		}
	}
	d.Eligible[MethodDrift] += len(drifted)
	if len(drifted) == 0 {
		return nil, nil
	}
	sortOldestFirst(drifted)
	drifted = withinBudget(drifted, b, apis.DisruptionReasonDrifted, d)
	for len(drifted) > 0 {
		sim, err := Simulate(ctx, v.Cluster, drifted)
		if err != nil {
			return nil, err
		}
		if sim.Schedulable {
			return newCommand(MethodDrift, apis.DisruptionReasonDrifted, driftDetail(drifted), drifted, sim, v.Now), nil
		}
		// Try fewer nodes (the newest drop out first).
		last := drifted[len(drifted)-1]
		d.Findings = append(d.Findings, Finding{Node: last.Name(), Reason: ReasonBlocked, Text: "Cannot disrupt drifted Node: " + sim.Reason})
		drifted = drifted[:len(drifted)-1]
	}
	return nil, nil
}

func driftDetail(cands []*Candidate) string {
	var rs []string
	for _, c := range cands {
		if !slices.Contains(rs, c.Drift) {
			rs = append(rs, c.Drift)
		}
	}
	slices.Sort(rs)
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += ", "
		}
		out += r
	}
	return out
}

func consolidatable(cands []*Candidate, d *Decision, method string) []*Candidate {
	var out []*Candidate
	for _, c := range cands {
		if c.Consolidatable {
			out = append(out, c)
		}
	}
	d.Eligible[method] = len(out)
	sortBySavings(out)
	return out
}

// multiNode finds the longest prefix (binary search) of the consolidatable
// candidates, sorted by savings per disruption cost and cut to the budgets,
// that can be deleted or replaced by one cheaper node.
func multiNode(ctx context.Context, v *View, cands []*Candidate, b Budgets, d *Decision) (*Command, error) {
	list := consolidatable(cands, d, MethodMultiNode)
	list = withinBudget(list, b, apis.DisruptionReasonUnderutilized, nil)
	if len(list) > v.Settings.MultiNodeMaxCandidates {
		list = list[:v.Settings.MultiNodeMaxCandidates]
	}
	if len(list) < 2 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, v.Settings.MultiNodeTimeout)
	defer cancel()
	var best *Command
	scr := d.screenFor(v.Cluster, list)
	lo, hi := 2, len(list)
	for lo <= hi && ctx.Err() == nil {
		mid := (lo + hi) / 2
		cmd, _, err := consolidate(ctx, v, scr, list[:mid], MethodMultiNode)
		if searchTimedOut(ctx, err) {
			break // the best found so far stands
		}
		if err != nil {
			return nil, err
		}
		if cmd != nil {
			best = cmd
			lo = mid + 1
		} else {
			hi = mid - 1
		}
	}
	return best, nil
}

// singleNode tries each consolidatable candidate alone: delete it, or
// replace it with one cheaper node.
func singleNode(ctx context.Context, v *View, cands []*Candidate, b Budgets, d *Decision) (*Command, error) {
	list := consolidatable(cands, d, MethodSingleNode)
	ctx, cancel := context.WithTimeout(ctx, v.Settings.SingleNodeTimeout)
	defer cancel()
	scr := d.screenFor(v.Cluster, list)
	for _, c := range list {
		if ctx.Err() != nil {
			break
		}
		if b.Allowed(c.NodePool.Name, apis.DisruptionReasonUnderutilized) <= 0 {
			d.Findings = append(d.Findings, Finding{Node: c.Name(), Reason: ReasonBlocked,
				Text: fmt.Sprintf("Cannot disrupt Node: NodePool %q has no disruption budget left for reason %s", c.NodePool.Name, apis.DisruptionReasonUnderutilized)})
			continue
		}
		cmd, why, err := consolidate(ctx, v, scr, []*Candidate{c}, MethodSingleNode)
		if searchTimedOut(ctx, err) {
			break
		}
		if err != nil {
			return nil, err
		}
		if cmd != nil {
			return cmd, nil
		}
		d.Findings = append(d.Findings, Finding{Node: c.Name(), Reason: ReasonUnconsol, Text: why})
	}
	return nil, nil
}

// searchTimedOut reports whether err is the search's own time bound
// running out (ctx is the search's): the search ends with what it found,
// as when the bound runs out between two tries, rather than failing the
// pass. A cancelled pass is still an error.
func searchTimedOut(ctx context.Context, err error) bool {
	return err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(err, context.DeadlineExceeded)
}

// maxReplacements bounds how many new nodes one consolidation launches
// before it deletes anything.
const maxReplacements = 3

// consolidate decides whether cands can go: all their pods fit elsewhere
// (delete), or at most maxReplacements new nodes that together cost less
// than all of them take what does not fit (replace). why says why not.
// The screen spares the simulation when it cannot succeed.
func consolidate(ctx context.Context, v *View, scr *screen, cands []*Candidate, method string) (*Command, string, error) {
	if why, err := scr.hopeless(cands); err != nil || why != "" {
		return nil, why, err
	}
	sim, err := Simulate(ctx, v.Cluster, cands)
	if err != nil {
		return nil, "", err
	}
	if !sim.Schedulable {
		return nil, "Can't remove without creating 2 or more nodes: " + sim.Reason, nil
	}
	if len(sim.Replacements) == 0 {
		cmd := newCommand(method, apis.DisruptionReasonUnderutilized, "", cands, sim, v.Now)
		if why := balancedVerdict(v, cands, cmd.Savings()); why != "" {
			return nil, why, nil
		}
		return cmd, "", nil
	}
	// More than one replacement is allowed when together they are cheaper:
	// the solver right-sizes, so one big node's pods may be bought as two
	// smaller nodes of different families, and a running cluster should
	// converge to what a fresh plan would buy (Karpenter allows one).
	if len(sim.Replacements) > maxReplacements {
		return nil, fmt.Sprintf("Can't remove without creating %d nodes", len(sim.Replacements)), nil
	}
	if why := replacementOK(v, cands, sim); why != "" {
		return nil, why, nil
	}
	cmd := newCommand(method, apis.DisruptionReasonUnderutilized, "", cands, sim, v.Now)
	if why := balancedVerdict(v, cands, cmd.Savings()); why != "" {
		return nil, why, nil
	}
	return cmd, "", nil
}

// replacementOK applies the rules a replacement must meet: strictly
// cheaper (so a node is never replaced by one of the same type and price,
// and consolidation can never cycle: every action lowers the cost), spot to
// spot only for one node with enough cheaper spot types, and never back to
// a type the same nodes were replaced from recently (flip-flop).
func replacementOK(v *View, cands []*Candidate, sim Simulation) string {
	cost := 0.0
	allSpot := true
	for _, c := range cands {
		cost += c.Price
		allSpot = allSpot && c.CapacityType == scheduling.CapacityTypeSpot
	}
	if sim.Cost >= cost-1e-9 {
		return fmt.Sprintf("Can't replace with a cheaper node (replacement $%.3f/h, current $%.3f/h)", sim.Cost, cost)
	}
	for _, r := range sim.Replacements {
		if r.CapacityType == scheduling.CapacityTypeSpot && allSpot {
			if !v.Settings.SpotToSpotConsolidation {
				return "Can't replace a spot node with a spot node: SpotToSpotConsolidation is disabled (feature gate)"
			}
			if len(cands) > 1 {
				return "Can't replace spot nodes with a spot node in multi-node consolidation"
			}
			cheaper := 0
			for _, t := range r.InstanceTypeOptions {
				if p, ok := cheapestPrice(v.Cluster.Catalog, t, scheduling.CapacityTypeSpot); ok && p < cost {
					cheaper++
				}
			}
			if cheaper < v.Settings.SpotToSpotMinTypes {
				return fmt.Sprintf("Can't replace a spot node with a spot node: only %d cheaper spot instance types, want %d", cheaper, v.Settings.SpotToSpotMinTypes)
			}
		}
	}
	if why := flipFlop(v, cands, sim); why != "" {
		return why
	}
	return ""
}

// flipFlop rejects a replacement that would turn nodes that recently
// replaced type T back into T.
func flipFlop(v *View, cands []*Candidate, sim Simulation) string {
	for _, h := range v.History {
		if v.Now.Sub(h.At) > v.Settings.FlipFlopWindow {
			continue
		}
		for _, c := range cands {
			if !slices.Contains(h.Replacements, c.Claim.Name) {
				continue
			}
			for _, r := range sim.Replacements {
				if slices.Contains(h.FromTypes, r.InstanceType) {
					return fmt.Sprintf("Won't replace %s back to %s: it replaced that type %s ago", c.Name(), r.InstanceType, v.Now.Sub(h.At).Round(time.Second))
				}
			}
		}
	}
	return ""
}

// repack is the global check Karpenter lacks: solve each consolidating
// pool's pods from scratch; when that ideal plan is cheaper than what runs
// by more than the thresholds, take one step towards it within the budget:
// the largest set of the pool's candidates (by savings) whose pods fit on
// the rest of the cluster plus any number of new nodes that together cost
// less than the set. Several passes take several steps.
func repack(ctx context.Context, v *View, cands []*Candidate, b Budgets, d *Decision) (*Command, error) {
	if v.Settings.DisableRepack {
		return nil, nil
	}
	byPool := map[string][]*Candidate{}
	for _, c := range cands {
		if c.Consolidatable {
			byPool[c.NodePool.Name] = append(byPool[c.NodePool.Name], c)
		}
	}
	for _, np := range v.Cluster.Config.NodePools {
		list := byPool[np.Name]
		if len(list) < 2 {
			continue
		}
		if hopeless, err := repackHopeless(v, d, np.Name); err != nil || hopeless {
			if err != nil {
				return nil, err
			}
			continue
		}
		ideal, current, ok, err := IdealCost(ctx, v.Cluster, np.Name)
		if err != nil {
			return nil, err
		}
		if !ok || !RepackWorthwhile(current, ideal, v.Settings) {
			continue
		}
		sortBySavings(list)
		list = withinBudget(list, b, apis.DisruptionReasonUnderutilized, nil)
		for k := len(list); k >= 2; k-- {
			set := list[:k]
			sim, err := Simulate(ctx, v.Cluster, set)
			if err != nil {
				return nil, err
			}
			if !sim.Schedulable {
				continue
			}
			if why := repackStepOK(v, set, sim); why != "" {
				continue
			}
			cmd := newCommand(MethodRepack, apis.DisruptionReasonUnderutilized, "", set, sim, v.Now)
			cmd.Detail = fmt.Sprintf("pool %s costs $%.3f/h, ideal $%.3f/h", np.Name, current, ideal)
			cmd.Message += fmt.Sprintf(" (re-pack: NodePool %s costs $%.3f/h, ideal plan $%.3f/h)", np.Name, current, ideal)
			return cmd, nil
		}
	}
	return nil, nil
}

func repackStepOK(v *View, set []*Candidate, sim Simulation) string {
	cost := 0.0
	var from []string
	for _, c := range set {
		cost += c.Price
		from = append(from, c.InstanceType+"/"+c.CapacityType)
	}
	if sim.Cost >= cost-1e-9 {
		return "not cheaper"
	}
	var to []string
	for _, r := range sim.Replacements {
		to = append(to, r.InstanceType+"/"+r.CapacityType)
	}
	slices.Sort(from)
	slices.Sort(to)
	if slices.Equal(from, to) {
		return "same shape"
	}
	if why := balancedVerdict(v, set, cost-sim.Cost); why != "" {
		return why
	}
	return flipFlop(v, set, sim)
}

// RepackWorthwhile applies the thresholds: savings above both the fraction
// of the current cost and the absolute amount.
func RepackWorthwhile(current, ideal float64, s Settings) bool {
	s.Defaults()
	save := current - ideal
	return save > s.RepackMinSavings && save > s.RepackMinSavingsFraction*current
}

// IdealCost solves a pool's pods from scratch (all its managed nodes gone)
// and returns the new nodes' cost next to what the pool's nodes cost now.
// ok is false when the pool has no nodes or some pod would not schedule.
func IdealCost(ctx context.Context, c *state.Cluster, pool string) (ideal, current float64, ok bool, err error) {
	cands, current := poolNodes(c, pool)
	if len(cands) == 0 {
		return 0, 0, false, nil
	}
	sim, err := Simulate(ctx, c, cands)
	if err != nil {
		return 0, 0, false, err
	}
	if !sim.Schedulable {
		return 0, current, false, nil
	}
	return sim.Cost, current, true, nil
}

// poolNodes are a pool's managed nodes as IdealCost removes them (as
// candidates with their reschedulable pods), and what they cost now.
func poolNodes(c *state.Cluster, pool string) (cands []*Candidate, current float64) {
	for _, n := range c.Nodes {
		if n.Claim == nil || n.Node == nil || n.NodePool() != pool || n.MarkedForDeletion() {
			continue
		}
		current += offeringPrice(c.Catalog, n.Node.Labels[scheduling.LabelInstanceType], n.Node.Labels[scheduling.LabelZone], n.Node.Labels[scheduling.LabelCapacityType])
		cands = append(cands, &Candidate{Node: n, Pods: n.ReschedulablePods()})
	}
	return cands, current
}

// repackHopeless reports whether re-packing pool cannot be worthwhile
// without solving it: IdealCost's simulation gives new nodes that cost
// at least the screen's floor, so when the floor is too close to what the
// pool costs now, so is the ideal plan (RepackWorthwhile).
func repackHopeless(v *View, d *Decision, pool string) (bool, error) {
	cands, current := poolNodes(v.Cluster, pool)
	if len(cands) == 0 {
		return false, nil
	}
	floor, err := d.screenFor(v.Cluster, cands).floor(cands)
	if err != nil {
		return false, err
	}
	return !RepackWorthwhile(current, floor, v.Settings), nil
}
