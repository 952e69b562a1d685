package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/workload"
)

type simulateOptions struct {
	config   string
	workload string
	nodes    string
	catalog  string
	region   string
	output   string
}

func newSimulateCmd() *cobra.Command {
	var o simulateOptions
	cmd := &cobra.Command{
		Use:   "simulate --config DIR --workload FILE [--nodes FILE] [--catalog builtin|DIR] [--region R] [-o table|json]",
		Short: "Show the NodeClaims nodewright would launch for a workload",
		Long: `simulate runs the provisioning solver offline: it reads NodePools and
EC2NodeClasses from --config, pods and their controllers (Deployments,
ReplicaSets, StatefulSets, Jobs expanded to <owner>-<i> pods; DaemonSets as
per-node overhead) from --workload, and optionally existing nodes with their
pods from --nodes (the output of 'kubectl get nodes,pods -A -o yaml'), and
prints the plan: new NodeClaims, pods placed on existing nodes, and the pods
that cannot be scheduled with the reason.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "file or folder of NodePool and EC2NodeClass YAML (required)")
	f.StringVar(&o.workload, "workload", "", "YAML/JSON manifests of the pods to place (required)")
	f.StringVar(&o.nodes, "nodes", "", "existing Nodes and their Pods (kubectl get nodes,pods -A -o yaml)")
	f.StringVar(&o.catalog, "catalog", "builtin", `instance type catalog: "builtin" or a folder laid out like aws-data`)
	f.StringVar(&o.region, "region", "", "AWS region whose offerings and prices to use (default: the region of the NodePools' zone requirements, else "+defaultRegion+")")
	f.StringVarP(&o.output, "output", "o", "table", "output format: table or json")
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagRequired("workload")
	return cmd
}

func runSimulate(ctx context.Context, o simulateOptions, stdout, stderr io.Writer) error {
	if o.output != "table" && o.output != "json" {
		return fmt.Errorf("--output %q: want table or json", o.output)
	}
	cfg, err := apis.Load(o.config)
	if cfg != nil {
		for _, w := range cfg.Warnings {
			fmt.Fprintln(stderr, "warning:", w.String())
		}
	}
	if err != nil {
		return fmt.Errorf("load --config %s: %w", o.config, err)
	}
	if len(cfg.NodePools) == 0 {
		return fmt.Errorf("--config %s: no NodePool found", o.config)
	}
	region := o.region
	if region == "" {
		region = simInferRegion(cfg)
	}
	cat, err := loadCatalog(o.catalog, region)
	if err != nil {
		return err
	}
	files := []string{o.workload}
	if o.nodes != "" {
		files = append(files, o.nodes)
	}
	wl, err := workload.ParseFiles(files...)
	if err != nil {
		return fmt.Errorf("read workload: %w", err)
	}
	for _, w := range wl.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	in, err := simulationInput(cfg, cat, wl)
	if err != nil {
		return err
	}
	plan, err := scheduling.Solve(ctx, &in)
	if err != nil {
		return fmt.Errorf("solve: %w", err)
	}
	out := newSimulateOutput(cat, plan)
	if o.output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	return writeSimulateTable(stdout, out, cat)
}

const defaultRegion = "us-east-1"

// inferRegion returns the region the NodePools' zone requirements name, when
// they name exactly one; a simulation in another region could place nothing.
func simInferRegion(cfg *apis.Config) string {
	regions := map[string]bool{}
	for _, np := range cfg.NodePools {
		for _, r := range np.Spec.Template.Spec.Requirements {
			if r.Key != catalog.LabelTopologyZone || r.Operator != corev1.NodeSelectorOpIn {
				continue
			}
			for _, z := range r.Values {
				if len(z) > 1 {
					regions[z[:len(z)-1]] = true
				}
			}
		}
	}
	if len(regions) == 1 {
		for r := range regions {
			return r
		}
	}
	return defaultRegion
}

func loadCatalog(src, region string) (*catalog.Catalog, error) {
	if src == "" || src == "builtin" {
		c, err := catalog.Builtin(region)
		if err != nil {
			return nil, fmt.Errorf("--catalog builtin: %w; pass --region %s or --catalog DIR with offerings-%s.json", err,
				strings.Join(catalog.BuiltinRegions(), "|"), region)
		}
		return c, nil
	}
	st, err := os.Stat(src)
	if err != nil {
		return nil, fmt.Errorf("--catalog %s: %w", src, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("--catalog %s: not a folder (want \"builtin\" or a folder like aws-data)", src)
	}
	return catalog.LoadDir(src, region)
}

// The JSON shape of `simulate -o json`, kept separate from the solver's
// types so the documented shape holds whatever the solver adds.
type simulateOutput struct {
	NodeClaims    []claimOutput        `json:"nodeClaims"`
	ExistingNodes []existingNodeOutput `json:"existingNodes"`
	Unschedulable []unschedulableOut   `json:"unschedulable"`
	CostPerHour   float64              `json:"costPerHour"`
}

type claimOutput struct {
	Name                string              `json:"name"`
	NodePool            string              `json:"nodePool"`
	NodeClass           string              `json:"nodeClass,omitempty"`
	InstanceType        string              `json:"instanceType"`
	CapacityType        string              `json:"capacityType"`
	Zone                string              `json:"zone"`
	PricePerHour        float64             `json:"pricePerHour"`
	PriceSource         string              `json:"priceSource,omitempty"`
	InstanceTypeOptions []string            `json:"instanceTypeOptions"`
	Labels              map[string]string   `json:"labels"`
	Taints              []taintOutput       `json:"taints"`
	StartupTaints       []taintOutput       `json:"startupTaints,omitempty"`
	Allocatable         map[string]string   `json:"allocatable"`
	Requests            map[string]string   `json:"requests,omitempty"`
	Requirements        []requirementOutput `json:"requirements,omitempty"`
	Pods                []string            `json:"pods"`
}

type taintOutput struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Effect string `json:"effect"`
}

type requirementOutput struct {
	Key       string   `json:"key"`
	Operator  string   `json:"operator"`
	Values    []string `json:"values,omitempty"`
	MinValues int      `json:"minValues,omitempty"`
}

type existingNodeOutput struct {
	Name string   `json:"name"`
	Pods []string `json:"pods"`
}

type unschedulableOut struct {
	Pod    string `json:"pod"`
	Reason string `json:"reason"`
}

func newSimulateOutput(cat *catalog.Catalog, plan *scheduling.Plan) simulateOutput {
	out := simulateOutput{
		NodeClaims:    []claimOutput{},
		ExistingNodes: []existingNodeOutput{},
		Unschedulable: []unschedulableOut{},
	}
	for _, c := range plan.NodeClaims {
		co := claimOutput{
			Name: c.Name, NodePool: c.NodePool, NodeClass: c.NodeClass, InstanceType: c.InstanceType,
			CapacityType: c.CapacityType, Zone: c.Zone, PricePerHour: c.PricePerHour,
			InstanceTypeOptions: simNonNil(c.InstanceTypeOptions),
			Labels:              simClaimLabels(cat, c),
			Taints:              simTaints(c.Taints),
			StartupTaints:       simTaints(c.StartupTaints),
			Allocatable:         simQuantities(c.Allocatable),
			Requests:            simNonZero(simQuantities(c.Requests)),
			Pods:                simNonNil(c.Pods),
		}
		if len(co.StartupTaints) == 0 {
			co.StartupTaints = nil
		}
		if len(co.Requests) == 0 {
			co.Requests = nil
		}
		if it, ok := cat.Get(c.InstanceType); ok {
			if o, ok := it.Offering(c.Zone, c.CapacityType); ok {
				co.PriceSource = o.PriceSource
			}
		}
		for _, r := range c.Requirements {
			co.Requirements = append(co.Requirements, requirementOutput{Key: r.Key, Operator: string(r.Operator), Values: r.Values, MinValues: c.MinValues[r.Key]})
		}
		out.NodeClaims = append(out.NodeClaims, co)
		out.CostPerHour += c.PricePerHour
	}
	for _, n := range plan.ExistingNodes {
		out.ExistingNodes = append(out.ExistingNodes, existingNodeOutput{Name: n.Name, Pods: simNonNil(n.Pods)})
	}
	for _, u := range plan.Unschedulable {
		out.Unschedulable = append(out.Unschedulable, unschedulableOut{Pod: u.Pod, Reason: u.Reason})
	}
	return out
}

// nonZero drops zero quantities (a claim's requests list every resource the
// solver tracks, most of them unused).
func simNonZero(m map[string]string) map[string]string {
	for k, v := range m {
		if v == "0" {
			delete(m, k)
		}
	}
	return m
}

func simNonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func simTaints(ts []corev1.Taint) []taintOutput {
	out := make([]taintOutput, 0, len(ts))
	for _, t := range ts {
		out = append(out, taintOutput{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})
	}
	return out
}

func simQuantities(l corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[string(k)] = v.String()
	}
	return out
}

func writeSimulateTable(w io.Writer, out simulateOutput, cat *catalog.Catalog) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	placedNew, placedExisting := 0, 0
	if len(out.NodeClaims) > 0 {
		fmt.Fprintln(tw, "NODECLAIM\tNODEPOOL\tINSTANCE TYPE\tCAPACITY\tZONE\t$/HOUR\tPODS\tCPU\tMEMORY\tOPTIONS")
		for _, c := range out.NodeClaims {
			placedNew += len(c.Pods)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.4f\t%d\t%s\t%s\t%s\n", c.Name, c.NodePool, c.InstanceType, c.CapacityType,
				c.Zone, c.PricePerHour, len(c.Pods), c.Allocatable["cpu"], c.Allocatable["memory"], simSummarizeOptions(c.InstanceTypeOptions))
		}
		fmt.Fprintln(tw)
	}
	if len(out.ExistingNodes) > 0 {
		fmt.Fprintln(tw, "EXISTING NODE\tNEW PODS")
		for _, n := range out.ExistingNodes {
			placedExisting += len(n.Pods)
			fmt.Fprintf(tw, "%s\t%s\n", n.Name, simSummarize(n.Pods, 6))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(out.Unschedulable) > 0 {
		fmt.Fprintln(w, "UNSCHEDULABLE POD  REASON")
		for _, u := range out.Unschedulable {
			fmt.Fprintf(w, "%s  %s\n", u.Pod, u.Reason)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "%d new node(s), $%.4f/hour ($%.2f/month) in %s; %d pod(s) on new nodes, %d on existing nodes, %d unschedulable\n",
		len(out.NodeClaims), out.CostPerHour, out.CostPerHour*730, cat.Region, placedNew, placedExisting, len(out.Unschedulable))
	return nil
}

func simSummarizeOptions(opts []string) string {
	if len(opts) <= 3 {
		return strings.Join(opts, ",")
	}
	return fmt.Sprintf("%s,... (%d)", strings.Join(opts[:3], ","), len(opts))
}

func simSummarize(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ",")
	}
	return fmt.Sprintf("%s,... (%d)", strings.Join(items[:n], ","), len(items))
}
