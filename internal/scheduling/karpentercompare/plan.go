package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/simulation"
)

func runPlan(args []string, stdout, stderr io.Writer, sideBySide bool) error {
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var src simulation.Sources
	fs.StringVar(&src.Config, "config", "", "NodePool and EC2NodeClass YAML: a file, or a folder of them")
	fs.StringVar(&src.Workload, "workload", "", "manifests of the pods to place")
	fs.StringVar(&src.Nodes, "nodes", "", "optional: existing Nodes and their Pods")
	fs.StringVar(&src.Catalog, "catalog", "builtin", `"builtin" or a folder laid out like aws-data`)
	fs.StringVar(&src.Region, "region", "", "region (default: inferred from the NodePools' zones)")
	output := fs.String("o", "json", "json (simulate's JSON shape) or table")
	fs.BoolVar(&sideBySide, "side-by-side", sideBySide, "print a summary of both plans instead of Karpenter's plan")
	var ks karpenterSettings
	karpenterFlags(fs, &ks)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if src.Config == "" || src.Workload == "" {
		return fmt.Errorf("plan: --config and --workload are required")
	}
	setup, err := simulation.Load(src)
	for _, w := range setupWarnings(setup) {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if err != nil {
		return err
	}
	ctx, err := karpenterContext(context.Background())
	if err != nil {
		return err
	}
	nw, kp, err := bothPlans(ctx, setup, ks)
	if err != nil {
		return err
	}
	if sideBySide {
		return writeSideBySide(stdout, nw, kp)
	}
	return writePlan(stdout, *output, kp, setup)
}

func karpenterFlags(fs *flag.FlagSet, ks *karpenterSettings) {
	fs.IntVar(&ks.concurrency, "karpenter-concurrency", 0, "Karpenter's NumConcurrentReconciles (0: the controller's default, 1)")
	fs.DurationVar(&ks.timeout, "karpenter-timeout", provisionerSolveTimeout,
		"bound on Karpenter's Solve, as its provisioner's (0: none); pods not reached are reported unschedulable")
}

func setupWarnings(s *simulation.Setup) []string {
	if s == nil {
		return nil
	}
	return s.Warnings
}

func writePlan(w io.Writer, format string, out simulation.Output, setup *simulation.Setup) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	case "table":
		return simulation.WriteTable(w, out, setup.Catalog)
	}
	return fmt.Errorf("-o %q: want json or table", format)
}

// bothPlans solves the loaded input with nodewright and with Karpenter.
// Karpenter's plan gets nodewright's lower bound when it is valid for it:
// the bound covers nodewright's new-claim pods, so it bounds any plan that
// puts at least those pods on new claims.
func bothPlans(ctx context.Context, setup *simulation.Setup, ks karpenterSettings) (nw, kp simulation.Output, err error) {
	in := setup.Input
	plan, err := scheduling.Solve(ctx, &in)
	if err != nil {
		return nw, kp, fmt.Errorf("nodewright solve: %w", err)
	}
	nw = simulation.NewOutput(setup.Catalog, plan)
	k, err := newKarpenterInput(setup.Config, &setup.Input, ks)
	if err != nil {
		return nw, kp, err
	}
	kc, err := k.cluster(ctx)
	if err != nil {
		return nw, kp, err
	}
	res, err := k.solve(ctx, kc)
	if err != nil {
		return nw, kp, err
	}
	kp = karpenterOutput(setup.Catalog, res)
	applyLowerBound(&kp, nw)
	return nw, kp, nil
}

func applyLowerBound(kp *simulation.Output, nw simulation.Output) {
	if nw.LowerBoundPerHour <= 0 || !newClaimPods(*kp).covers(newClaimPods(nw)) {
		return
	}
	kp.LowerBoundPerHour = nw.LowerBoundPerHour
	kp.CostOverLowerBound = kp.CostPerHour / nw.LowerBoundPerHour
}

type podSet map[string]bool

func newClaimPods(o simulation.Output) podSet {
	s := podSet{}
	for _, c := range o.NodeClaims {
		for _, p := range c.Pods {
			s[p] = true
		}
	}
	return s
}

func (s podSet) covers(o podSet) bool {
	for p := range o {
		if !s[p] {
			return false
		}
	}
	return true
}

// writeSideBySide prints the two plans' summaries in columns.
func writeSideBySide(w io.Writer, nw, kp simulation.Output) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "\tNODEWRIGHT\tKARPENTER")
	row := func(name string, f func(simulation.Output) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(nw), f(kp))
	}
	row("new nodes", func(o simulation.Output) string { return fmt.Sprint(len(o.NodeClaims)) })
	row("pods on new nodes", func(o simulation.Output) string { return fmt.Sprint(len(newClaimPods(o))) })
	row("pods on existing nodes", func(o simulation.Output) string { return fmt.Sprint(existingPods(o)) })
	row("unschedulable", func(o simulation.Output) string { return fmt.Sprint(len(o.Unschedulable)) })
	row("$/hour", func(o simulation.Output) string { return fmt.Sprintf("%.4f", o.CostPerHour) })
	row("expected $/hour", func(o simulation.Output) string { return fmt.Sprintf("%.4f", o.ExpectedCostPerHour) })
	row("$/month (730h)", func(o simulation.Output) string { return fmt.Sprintf("%.2f", o.CostPerHour*730) })
	row("cost / lower bound", func(o simulation.Output) string {
		if o.LowerBoundPerHour <= 0 {
			return "-"
		}
		return fmt.Sprintf("%.3fx", o.CostOverLowerBound)
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nnodewright: %s\nkarpenter:  %s\n", typeMix(nw), typeMix(kp))
	if kp.CostPerHour > 0 {
		fmt.Fprintf(w, "nodewright $/h relative to Karpenter's: %.3fx (expected $/h: %.3fx)\n",
			nw.CostPerHour/kp.CostPerHour, nw.ExpectedCostPerHour/kp.ExpectedCostPerHour)
	}
	return nil
}

func existingPods(o simulation.Output) int {
	n := 0
	for _, e := range o.ExistingNodes {
		n += len(e.Pods)
	}
	return n
}

// typeMix lists the launched types with their counts, most used first.
func typeMix(o simulation.Output) string {
	counts := map[string]int{}
	for _, c := range o.NodeClaims {
		counts[c.InstanceType+" "+c.CapacityType]++
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if counts[keys[i]] != counts[keys[j]] {
			return counts[keys[i]] > counts[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%dx %s", counts[k], k))
	}
	if len(parts) == 0 {
		return "(no new nodes)"
	}
	return strings.Join(parts, ", ")
}
