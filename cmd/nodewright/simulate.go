package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/simulation"
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
		Use:   "simulate --config DIR --workload FILE [--nodes FILE] [--catalog builtin|DIR] [--region R] [-o table|json|yaml|html]",
		Short: "Show the NodeClaims nodewright would launch for a workload",
		Long: `simulate runs the provisioning solver offline: it reads NodePools and
EC2NodeClasses from --config, pods and their controllers (Deployments,
ReplicaSets, StatefulSets, Jobs expanded to <owner>-<i> pods; DaemonSets as
per-node overhead) from --workload, and optionally existing nodes with their
pods from --nodes (the output of 'kubectl get nodes,pods -A -o yaml'), and
prints the plan: new NodeClaims, pods placed on existing nodes, and the pods
that cannot be scheduled with the reason.

-o json and -o yaml print the plan for programs; -o html a self-contained page
(one bar per new node: CPU and memory used against allocatable, coloured by
NodePool). simulate exits 3 when pods are left unschedulable, so CI can gate a
configuration change on it.`,
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
	f.StringVar(&o.region, "region", "", "AWS region whose offerings and prices to use (default: the region of the NodePools' zone requirements, else "+simulation.DefaultRegion+")")
	f.StringVarP(&o.output, "output", "o", "table", "output format: "+strings.Join(simulateOutputs, ", "))
	_ = cmd.MarkFlagRequired("config")
	_ = cmd.MarkFlagRequired("workload")
	return cmd
}

func runSimulate(ctx context.Context, o simulateOptions, stdout, stderr io.Writer) error {
	if !slices.Contains(simulateOutputs, o.output) {
		return usageError(fmt.Errorf("--output %q: want %s", o.output, strings.Join(simulateOutputs, ", ")))
	}
	setup, err := simulation.Load(simulation.Sources{
		Config: o.config, Workload: o.workload, Nodes: o.nodes, Catalog: o.catalog, Region: o.region,
	})
	for _, w := range setup.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if err != nil {
		return err
	}
	plan, err := scheduling.Solve(ctx, &setup.Input)
	if err != nil {
		return fmt.Errorf("solve: %w", err)
	}
	return writeSimulation(stdout, o.output, setup, plan)
}
