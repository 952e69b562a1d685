package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/catalog"
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
	// Reading a live cluster instead of --workload (simulate_cluster.go).
	cluster clusterFlags
	repack  bool
}

func newSimulateCmd() *cobra.Command {
	var o simulateOptions
	cmd := &cobra.Command{
		Use: "simulate --config DIR --workload FILE [--nodes FILE] [--catalog builtin|DIR] [--region R] [-o table|json|yaml|html]\n" +
			"  nodewright simulate --kubeconfig PATH [--context NAME] [--config DIR] [--repack] [--catalog builtin|DIR] [--region R] [-o ...]",
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
configuration change on it.

With --kubeconfig it reads a running cluster instead, and only reads (get
and list; no AWS call, prices come from --catalog): the pods the scheduler
marked Unschedulable are planned against the existing nodes (and the
NodeClaims Karpenter is still launching) and the NodePools of --config or,
without --config, the cluster's own Karpenter NodePools and EC2NodeClasses
(karpenter.sh/v1, karpenter.k8s.aws/v1). --repack plans every pod the nodes
run (DaemonSet and static pods aside) from scratch on new nodes and prints
what the current nodes cost per hour next to the plan's cost. The region is
the nodes' topology.kubernetes.io/region unless --region says otherwise.`,
		Example: `  nodewright simulate --config karpenter/ --workload deploy.yaml
  nodewright simulate --kubeconfig ~/.kube/config --context prod
  nodewright simulate --kubeconfig ~/.kube/config --config karpenter/ --repack -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runSimulate(cmd.Context(), o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.config, "config", "", "file or folder of NodePool and EC2NodeClass YAML (required unless --kubeconfig)")
	f.StringVar(&o.workload, "workload", "", "YAML/JSON manifests of the pods to place (required unless --kubeconfig)")
	f.StringVar(&o.nodes, "nodes", "", "existing Nodes and their Pods (kubectl get nodes,pods -A -o yaml)")
	f.StringVar(&o.catalog, "catalog", "builtin", `instance type catalog: "builtin" or a folder laid out like aws-data`)
	f.StringVar(&o.region, "region", "", "AWS region whose offerings and prices to use (default: the region of the NodePools' zone requirements, else "+simulation.DefaultRegion+")")
	f.StringVarP(&o.output, "output", "o", "table", "output format: "+strings.Join(simulateOutputs, ", "))
	o.cluster.add(cmd, "read the pods, nodes and (without --config) Karpenter NodePools of this kubeconfig's cluster, read-only")
	f.BoolVar(&o.repack, "repack", false, "with --kubeconfig: plan all the cluster's pods from scratch and compare with what its nodes cost now")
	cmd.MarkFlagsMutuallyExclusive("kubeconfig", "workload")
	cmd.MarkFlagsMutuallyExclusive("kubeconfig", "nodes")
	return cmd
}

func runSimulate(ctx context.Context, o simulateOptions, stdout, stderr io.Writer) error {
	if !slices.Contains(simulateOutputs, o.output) {
		return usageError(fmt.Errorf("--output %q: want %s", o.output, strings.Join(simulateOutputs, ", ")))
	}
	if o.cluster.kubeconfig != "" {
		return runSimulateCluster(ctx, o, stdout, stderr)
	}
	switch {
	case o.config == "" || o.workload == "":
		return usageError(errors.New("--config and --workload are required (or --kubeconfig to read a cluster)"))
	case o.repack:
		return usageError(errors.New("--repack needs --kubeconfig"))
	case o.cluster.context != "":
		return usageError(errors.New("--context needs --kubeconfig"))
	}
	setup, err := simulation.Load(simulation.Sources{
		Config: o.config, Workload: o.workload, Nodes: o.nodes, Catalog: o.catalog, Region: o.region,
	})
	printWarnings(stderr, setup.Warnings)
	if err != nil {
		return err
	}
	return solveAndWrite(ctx, &setup.Input, scheduling.Options{}, setup.Catalog, nil, o.output, stdout)
}

func printWarnings(stderr io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
}

// solveAndWrite solves and prints the plan in format; fleet, when set, is
// the current nodes' cost the plan is compared with.
func solveAndWrite(ctx context.Context, in *scheduling.Input, opts scheduling.Options, cat *catalog.Catalog,
	fleet *simulation.FleetOutput, format string, stdout io.Writer) error {
	plan, err := scheduling.SolveWithOptions(ctx, in, opts)
	if err != nil {
		return fmt.Errorf("solve: %w", err)
	}
	out := simulation.NewOutput(cat, plan)
	out.CurrentFleet = fleet
	return writeSimulation(stdout, format, cat, out)
}
