package decision

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as indented JSON.
func WriteJSON(w io.Writer, r Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes the report for a terminal.
func WriteTable(w io.Writer, r Report) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }
	p("nodewright report (shadow mode): %s to %s, %d provisioning and %d fleet passes recorded",
		r.Since.UTC().Format(time.RFC3339), r.Until.UTC().Format(time.RFC3339), r.LaunchPasses, r.FleetPasses)
	l := r.Latency
	p("\nPENDING PODS")
	p("  pods nodewright planned for\t%d\t(%d got a node in the window, %d still pending)", l.Pods, l.Scheduled, l.StillPending)
	observed := "-"
	if l.Scheduled > 0 {
		observed = quantile(l.Observed)
	}
	p("  observed wait\t%s\t(creation to PodScheduled, whoever launched the node)", observed)
	if l.StillPending > 0 {
		p("  still pending\tlongest %s", seconds(l.LongestPending))
	}
	p("  nodewright's decision\t%s\t(snapshot to plan, after its 1-10 s batching window)", quantile(l.Decision))
	p("\nCOST ($/h, latest fleet pass)")
	p("  fleet now\t%.4f", r.Cost.ActualPerHour)
	p("  nodewright's plan\t%.4f\t(the same pods, each NodePool planned from scratch)", r.Cost.PlanPerHour)
	p("\nWOULD LAUNCH (latest plan, %s; %d NodeClaims planned in the window)", stamp(r.WouldLaunchAt), r.WouldLaunchTotal)
	if len(r.WouldLaunch) > 0 {
		p("NODECLAIM\tNODEPOOL\tTYPE\tZONE\tCAPACITY\t$/H\tPODS")
		for _, c := range r.WouldLaunch {
			p("%s\t%s\t%s\t%s\t%s\t%.4f\t%s", c.Name, c.NodePool, c.InstanceType, c.Zone, c.CapacityType, c.Price, strings.Join(c.Pods, ","))
		}
	}
	p("\nTOP CONSOLIDATION OPPORTUNITIES")
	if len(r.Opportunities) > 0 {
		p("METHOD\tACTION\tNODES\tREPLACEMENTS\tSAVES $/H\tSEEN\tLAST SEEN")
		for _, o := range r.Opportunities {
			p("%s\t%s\t%s\t%s\t%.4f\t%d\t%s", o.Item.Method, o.Item.Action, nodes(o.Item.Nodes), nodes(o.Item.Replacements), o.Item.SavingsPerHr, o.Times, stamp(o.LastSeen))
		}
	}
	p("\nWOULD NOT DISRUPT")
	if len(r.Blocked) > 0 {
		p("NODE\tREASON\tSEEN")
		for _, b := range r.Blocked {
			p("%s\t%s\t%d", b.Item.Node, b.Item.Reason, b.Times)
		}
	}
	p("\nCONFIGURATION NOT HONOURED")
	for _, w := range r.NotHonoured {
		p("  %s", w)
	}
	return tw.Flush()
}

func quantile(q Quantile) string {
	return fmt.Sprintf("p50 %s  p90 %s  max %s", seconds(q.P50), seconds(q.P90), seconds(q.Max))
}

// seconds prints s to the millisecond (a plan takes milliseconds, a wait
// minutes).
func seconds(s float64) string {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond).String()
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// nodes lists nodes as name (owner, type, $/h), or type for replacements.
func nodes(ns []Node) string {
	if len(ns) == 0 {
		return "-"
	}
	parts := make([]string, len(ns))
	for i, n := range ns {
		if n.Name == "" {
			parts[i] = fmt.Sprintf("%s %s %.4f", n.InstanceType, n.CapacityType, n.Price)
			continue
		}
		parts[i] = fmt.Sprintf("%s (%s, %s %.4f)", n.Name, n.Owner, n.InstanceType, n.Price)
	}
	return strings.Join(parts, "; ")
}
