package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/simulation"
)

// benchRow is one scenario solved by both schedulers.
type benchRow struct {
	Scenario   string      `json:"scenario"`
	Pods       int         `json:"pods"`
	Nodewright solverStats `json:"nodewright"`
	Karpenter  solverStats `json:"karpenter"`
	// CostRatio is nodewright's $/h over Karpenter's.
	CostRatio float64 `json:"nodewrightOverKarpenter"`
}

type solverStats struct {
	Nodes       int     `json:"nodes"`
	CostPerHour float64 `json:"costPerHour"`
	// ExpectedCostPerHour prices spot claims at the mean of their cheapest
	// options, as simulate's expectedCostPerHour.
	ExpectedCostPerHour float64 `json:"expectedCostPerHour"`
	Unschedulable       int     `json:"unschedulable"`
	// CostOverLowerBound is 0 when nodewright's bound does not apply.
	CostOverLowerBound float64 `json:"costOverLowerBound"`
	// Unreached counts the pods Karpenter's Solve had not decided when its
	// timeout (the provisioner's 1 minute) expired; they count as
	// unschedulable, and the cost covers only the pods placed.
	Unreached int `json:"unreached,omitempty"`
	// SolveSeconds is the median wall time of a solve over the runs;
	// PodsPerSecond is the pods it decided (placed or rejected) over it.
	SolveSeconds  float64 `json:"solveSeconds"`
	PodsPerSecond float64 `json:"podsPerSecond"`
	// AllocatedMB is the median bytes allocated by a solve (TotalAlloc delta).
	AllocatedMB float64 `json:"allocatedMB"`
}

type benchFlags struct {
	scenarios, catalog, region, output string
	runs                               int
	karpenter                          karpenterSettings
	diverse                            []int
}

func runBench(args []string, stdout, stderr io.Writer) error {
	f, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(f.catalog, "instance-types.json.gz")); err != nil {
		fmt.Fprintf(stdout, "skipped: no catalog at %s (pass --catalog DIR laid out like aws-data)\n", f.catalog)
		return nil
	}
	ctx, err := karpenterContext(context.Background())
	if err != nil {
		return err
	}
	var rows []benchRow
	for _, c := range benchCases(f, stderr) {
		fmt.Fprintf(stderr, "solving %s ...\n", c.name)
		row, err := solveCase(ctx, c, f)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", c.name, err)
		}
		rows = append(rows, row)
	}
	if f.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return writeBenchTable(stdout, rows)
}

func parseBenchFlags(args []string, stderr io.Writer) (benchFlags, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	root := repoRoot()
	var f benchFlags
	fs.StringVar(&f.scenarios, "scenarios", filepath.Join(root, "internal", "scheduling", "testdata", "quality"),
		"folder of scenario folders, each with config.yaml and workload.yaml (and optionally nodes.yaml)")
	fs.StringVar(&f.catalog, "catalog", filepath.Join(root, "..", "shared", "aws-data"), "folder laid out like aws-data")
	fs.StringVar(&f.region, "region", simulation.DefaultRegion, "catalog region")
	fs.StringVar(&f.output, "o", "table", "table or json")
	fs.IntVar(&f.runs, "runs", 3, "solves per scheduler and scenario; times and allocations are the median")
	karpenterFlags(fs, &f.karpenter)
	diverse := fs.String("diverse", "5000,20000", "sizes of Karpenter's benchmark-shaped diverse workload to add (empty: none)")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if f.runs < 1 {
		return f, fmt.Errorf("--runs must be at least 1")
	}
	if f.output != "table" && f.output != "json" {
		return f, fmt.Errorf("-o %q: want table or json", f.output)
	}
	for _, s := range strings.Split(*diverse, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 5 {
			return f, fmt.Errorf("--diverse %q: want pod counts of at least 5", s)
		}
		f.diverse = append(f.diverse, n)
	}
	return f, nil
}

// repoRoot finds the product's module root above the working directory, so
// the defaults work from the module folder (`go run .`) or anywhere in the
// repository; "." when there is none.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(mod), "module github.com/nodewright/nodewright\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "."
		}
		dir = parent
	}
}

// benchCase is one input to solve: a scenario folder or a generated workload.
type benchCase struct {
	name string
	load func(f benchFlags) (*simulation.Setup, error)
}

func benchCases(f benchFlags, stderr io.Writer) []benchCase {
	var out []benchCase
	entries, err := os.ReadDir(f.scenarios)
	if err != nil {
		fmt.Fprintf(stderr, "no scenarios: %v\n", err)
	}
	for _, e := range entries {
		dir := filepath.Join(f.scenarios, e.Name())
		if !e.IsDir() || !exists(filepath.Join(dir, "config.yaml")) || !exists(filepath.Join(dir, "workload.yaml")) {
			continue
		}
		out = append(out, benchCase{name: e.Name(), load: func(f benchFlags) (*simulation.Setup, error) { return loadScenario(dir, f) }})
	}
	for _, n := range f.diverse {
		out = append(out, benchCase{name: fmt.Sprintf("diverse-%d", n), load: func(f benchFlags) (*simulation.Setup, error) { return loadDiverse(n, f) }})
	}
	return out
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// loadScenario reads a scenario folder; config.yaml is named explicitly
// because the folder also holds workload.yaml, which the config loader
// would read and skip with a warning.
func loadScenario(dir string, f benchFlags) (*simulation.Setup, error) {
	src := simulation.Sources{
		Config: filepath.Join(dir, "config.yaml"), Workload: filepath.Join(dir, "workload.yaml"),
		Catalog: f.catalog, Region: f.region,
	}
	if nodes := filepath.Join(dir, "nodes.yaml"); exists(nodes) {
		src.Nodes = nodes
	}
	return simulation.Load(src)
}

func solveCase(ctx context.Context, c benchCase, f benchFlags) (benchRow, error) {
	setup, err := c.load(f)
	if err != nil {
		return benchRow{}, err
	}
	row := benchRow{Scenario: c.name, Pods: len(setup.Input.Pods)}
	nw, nwStats, err := benchNodewright(ctx, setup, f.runs)
	if err != nil {
		return row, err
	}
	kp, kStats, err := benchKarpenter(ctx, setup, f)
	if err != nil {
		return row, err
	}
	applyLowerBound(&kp, nw)
	row.Nodewright = planStats(nw, nwStats, row.Pods)
	row.Karpenter = planStats(kp, kStats, row.Pods-kStats.unreached)
	row.Karpenter.Unreached = kStats.unreached
	if kp.CostPerHour > 0 {
		row.CostRatio = nw.CostPerHour / kp.CostPerHour
	}
	return row, nil
}

// planStats summarizes a plan; decided is how many pods the solver placed
// or rejected (all of them unless Karpenter timed out).
func planStats(o simulation.Output, m measurement, decided int) solverStats {
	s := solverStats{
		Nodes: len(o.NodeClaims), CostPerHour: o.CostPerHour, ExpectedCostPerHour: o.ExpectedCostPerHour,
		Unschedulable: len(o.Unschedulable),
		SolveSeconds:  m.wall.Seconds(), AllocatedMB: float64(m.alloc) / (1 << 20),
	}
	if o.LowerBoundPerHour > 0 {
		s.CostOverLowerBound = o.CostOverLowerBound
	}
	if m.wall > 0 {
		s.PodsPerSecond = float64(decided) / m.wall.Seconds()
	}
	return s
}

func benchNodewright(ctx context.Context, setup *simulation.Setup, runs int) (simulation.Output, measurement, error) {
	var plan *scheduling.Plan
	m, err := measure(runs, nil, func() (err error) {
		in := setup.Input
		plan, err = scheduling.Solve(ctx, &in)
		return err
	})
	if err != nil {
		return simulation.Output{}, m, fmt.Errorf("nodewright solve: %w", err)
	}
	return simulation.NewOutput(setup.Catalog, plan), m, nil
}

// benchKarpenter times what Provisioner.Schedule does once it has read the
// cluster (volume topology, topology, scheduler construction, Solve); the
// fake API server and cluster state are rebuilt untimed before each run,
// since the scheduler mutates the state nodes it is given.
func benchKarpenter(ctx context.Context, setup *simulation.Setup, f benchFlags) (simulation.Output, measurement, error) {
	k, err := newKarpenterInput(setup.Config, &setup.Input, f.karpenter)
	if err != nil {
		return simulation.Output{}, measurement{}, err
	}
	var kc *karpenterCluster
	var res *karpenterResult
	m, err := measure(f.runs, func() (err error) {
		kc, err = k.cluster(ctx)
		return err
	}, func() (err error) {
		res, err = k.solve(ctx, kc)
		return err
	})
	if err != nil {
		return simulation.Output{}, m, err
	}
	m.unreached = len(res.unreached)
	return karpenterOutput(setup.Catalog, res), m, nil
}

type measurement struct {
	wall      time.Duration
	alloc     uint64
	unreached int // of the last run
}

// measure runs prepare (untimed) and solve runs times and returns the
// median wall time and the median bytes allocated by solve.
func measure(runs int, prepare, solve func() error) (measurement, error) {
	walls := make([]time.Duration, 0, runs)
	allocs := make([]uint64, 0, runs)
	for range runs {
		if prepare != nil {
			if err := prepare(); err != nil {
				return measurement{}, err
			}
		}
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		err := solve()
		wall := time.Since(start)
		runtime.ReadMemStats(&after)
		if err != nil {
			return measurement{}, err
		}
		walls = append(walls, wall)
		allocs = append(allocs, after.TotalAlloc-before.TotalAlloc)
	}
	slices.Sort(walls)
	slices.Sort(allocs)
	return measurement{wall: walls[runs/2], alloc: allocs[runs/2]}, nil
}

func writeBenchTable(w io.Writer, rows []benchRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tPODS\tNW NODES\tNW $/H\tNW /LB\tNW PODS/S\tNW MB\tK NODES\tK $/H\tK /LB\tK PODS/S\tK MB\tUNSCHED NW/K\tNW/K $\t")
	for _, r := range rows {
		n, k := r.Nodewright, r.Karpenter
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.4f\t%s\t%.0f\t%.1f\t%d\t%.4f\t%s\t%.0f\t%.1f\t%d/%d%s\t%.3f%s\t\n",
			r.Scenario, r.Pods, n.Nodes, n.CostPerHour, ratio(n.CostOverLowerBound), n.PodsPerSecond, n.AllocatedMB,
			k.Nodes, k.CostPerHour, ratio(k.CostOverLowerBound), k.PodsPerSecond, k.AllocatedMB,
			n.Unschedulable, k.Unschedulable, mark(k.Unreached > 0, "t"), r.CostRatio, mark(n.Unschedulable != k.Unschedulable, "*"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w, "NW/K $: nodewright's $/h over Karpenter's; /LB: $/h over nodewright's lower bound (- where it does not apply);")
	fmt.Fprintln(w, "PODS/S: pods decided (placed or rejected) over the median solve wall time; MB: median bytes allocated by a solve;")
	fmt.Fprintln(w, "t: Karpenter's Solve hit its timeout and left pods undecided; *: the plans place different numbers of pods, so their costs cover different pods")
	return nil
}

func mark(cond bool, m string) string {
	if cond {
		return m
	}
	return ""
}

func ratio(r float64) string {
	if r <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", r)
}
