package decision

import (
	"math"
	"sort"
	"strings"
	"time"
)

// Report is what `nodewright report` prints for a window of records.
type Report struct {
	Since        time.Time `json:"since"`
	Until        time.Time `json:"until"`
	LaunchPasses int       `json:"launchPasses"`
	FleetPasses  int       `json:"fleetPasses"`
	Latency      Latency   `json:"latency"`
	Cost         Cost      `json:"cost"`
	// WouldLaunch is the latest pass's plan; WouldLaunchTotal counts the
	// claims every pass of the window planned.
	WouldLaunch      []Claim   `json:"wouldLaunch"`
	WouldLaunchAt    time.Time `json:"wouldLaunchAt,omitzero"`
	WouldLaunchTotal int       `json:"wouldLaunchTotal"`
	// Opportunities are the distinct consolidations, by savings.
	Opportunities []Seen[Opportunity] `json:"opportunities"`
	Blocked       []Seen[Blocked]     `json:"blocked"`
	NotHonoured   []string            `json:"notHonoured"`
}

// Latency compares how long pending pods waited with how long nodewright
// took to decide.
type Latency struct {
	// Pods is how many distinct pods nodewright planned capacity for.
	Pods int `json:"pods"`
	// Scheduled of them got a node in the window; Observed are their
	// waits (creation to PodScheduled), whoever launched the node.
	Scheduled int      `json:"scheduled"`
	Observed  Quantile `json:"observedSeconds"`
	// StillPending is how many never got a node in the window; LongestPending
	// the longest wait seen among them.
	StillPending   int     `json:"stillPending"`
	LongestPending float64 `json:"longestPendingSeconds"`
	// Decision is nodewright's time from its snapshot to its plan, per pass
	// (its batching window, 1 s idle up to 10 s, comes before it).
	Decision Quantile `json:"decisionSeconds"`
}

// Quantile summarises durations in seconds.
type Quantile struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	Max float64 `json:"max"`
}

// Cost is the fleet's $/h against nodewright's plan for the same pods.
type Cost struct {
	ActualPerHour float64 `json:"actualPerHour"`
	PlanPerHour   float64 `json:"planPerHour"`
	// Series are every fleet pass's figures, oldest first.
	Series []CostPoint `json:"series"`
}

// CostPoint is one fleet pass's figures.
type CostPoint struct {
	At     time.Time `json:"at"`
	Actual float64   `json:"actual"`
	Plan   float64   `json:"plan"`
}

// Seen is a finding with how often and when it was last seen.
type Seen[T any] struct {
	Item     T         `json:"item"`
	Times    int       `json:"times"`
	LastSeen time.Time `json:"lastSeen"`
}

// maxOpportunities bounds the report's list.
const maxOpportunities = 10

// Summarize builds the report of r for the window [since, until].
func Summarize(r Records, since, until time.Time) Report {
	rep := Report{Since: since, Until: until, LaunchPasses: len(r.Launches), FleetPasses: len(r.Fleets)}
	rep.Latency = latency(r)
	for _, l := range r.Launches {
		rep.WouldLaunchTotal += len(l.Claims)
		if !l.At.Before(rep.WouldLaunchAt) {
			rep.WouldLaunch, rep.WouldLaunchAt = l.Claims, l.At
		}
	}
	opps := map[string]*Seen[Opportunity]{}
	blocked := map[string]*Seen[Blocked]{}
	honour := map[string]bool{}
	for _, f := range r.Fleets {
		rep.Cost.Series = append(rep.Cost.Series, CostPoint{At: f.At, Actual: f.CostPerHour, Plan: f.PlanCostPerHour})
		rep.Cost.ActualPerHour, rep.Cost.PlanPerHour = f.CostPerHour, f.PlanCostPerHour
		if o := f.Opportunity; o != nil {
			see(opps, opportunityKey(o), *o, f.At)
		}
		for _, b := range f.Blocked {
			see(blocked, b.Node+"\x00"+b.Reason, b, f.At)
		}
		for _, w := range f.NotHonoured {
			honour[w] = true
		}
	}
	rep.Opportunities = sorted(opps, func(a, b Seen[Opportunity]) bool { return a.Item.SavingsPerHr > b.Item.SavingsPerHr })
	if len(rep.Opportunities) > maxOpportunities {
		rep.Opportunities = rep.Opportunities[:maxOpportunities]
	}
	rep.Blocked = sorted(blocked, func(a, b Seen[Blocked]) bool { return a.Item.Node < b.Item.Node })
	for w := range honour {
		rep.NotHonoured = append(rep.NotHonoured, w)
	}
	sort.Strings(rep.NotHonoured)
	return rep
}

func opportunityKey(o *Opportunity) string {
	names := make([]string, len(o.Nodes))
	for i, n := range o.Nodes {
		names[i] = n.Name
	}
	sort.Strings(names)
	return o.Method + "\x00" + strings.Join(names, ",")
}

// see counts v under key, keeping the latest version of it.
func see[T any](m map[string]*Seen[T], key string, v T, at time.Time) {
	s, ok := m[key]
	if !ok {
		s = &Seen[T]{}
		m[key] = s
	}
	s.Times++
	if !at.Before(s.LastSeen) {
		s.Item, s.LastSeen = v, at
	}
}

func sorted[T any](m map[string]*Seen[T], less func(a, b Seen[T]) bool) []Seen[T] {
	out := make([]Seen[T], 0, len(m))
	for _, s := range m {
		out = append(out, *s)
	}
	sort.SliceStable(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}

// latency joins the pods the plans named with the pods the fleet passes
// saw scheduled.
func latency(r Records) Latency {
	pending := map[string]float64{}
	var decisions []float64
	for _, l := range r.Launches {
		decisions = append(decisions, l.DecisionSeconds)
		planned := map[string]bool{}
		for _, c := range l.Claims {
			for _, p := range c.Pods {
				planned[p] = true
			}
		}
		for _, p := range l.Pending {
			if planned[p.Pod] || len(planned) == 0 {
				pending[p.Pod] = math.Max(pending[p.Pod], p.Seconds)
			}
		}
	}
	scheduled := map[string]float64{}
	for _, f := range r.Fleets {
		for _, p := range f.Scheduled {
			if _, ok := pending[p.Pod]; ok {
				scheduled[p.Pod] = p.Seconds
			}
		}
	}
	out := Latency{Pods: len(pending), Scheduled: len(scheduled), Decision: quantiles(decisions)}
	var observed []float64
	for pod, wait := range pending {
		if s, ok := scheduled[pod]; ok {
			observed = append(observed, s)
			continue
		}
		out.StillPending++
		out.LongestPending = math.Max(out.LongestPending, wait)
	}
	out.Observed = quantiles(observed)
	return out
}

func quantiles(v []float64) Quantile {
	if len(v) == 0 {
		return Quantile{}
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	at := func(q float64) float64 { return s[int(math.Ceil(q*float64(len(s))))-1] }
	return Quantile{P50: at(0.5), P90: at(0.9), Max: s[len(s)-1]}
}
