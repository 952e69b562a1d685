package main

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/livecluster"
)

// clusterFlags point a command at a running cluster (simulate, import).
type clusterFlags struct {
	kubeconfig, context string
}

func (c *clusterFlags) add(cmd *cobra.Command, kubeconfigUsage string) {
	cmd.Flags().StringVar(&c.kubeconfig, "kubeconfig", "", kubeconfigUsage)
	cmd.Flags().StringVar(&c.context, "context", "", "kubeconfig context (default: its current context)")
}

// runSimulateCluster is `simulate --kubeconfig`: the cluster's pending pods
// (or, with --repack, all its pods from scratch) planned read-only.
func runSimulateCluster(ctx context.Context, o simulateOptions, stdout, stderr io.Writer) error {
	setup, err := livecluster.Load(ctx, livecluster.Sources{
		Kubeconfig: o.cluster.kubeconfig, Context: o.cluster.context, Config: o.config,
		Catalog: o.catalog, Region: o.region, Repack: o.repack,
	})
	printWarnings(stderr, setup.Warnings)
	if err != nil {
		return err
	}
	return solveAndWrite(ctx, setup.Input, setup.Options, setup.Catalog, setup.Fleet, o.output, stdout)
}
