package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/inspect"
	"github.com/nodewright/nodewright/internal/store"
)

func newDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe nodeclaim NAME",
		Short: "Show one NodeClaim: where it runs, its conditions, its lifecycle and why it was disrupted",
		Long: `Describe prints one NodeClaim from the nodewright table the way
'kubectl describe nodeclaim' lays it out: identity and placement, price, the
disruption decision (reason, message, when, drain deadline), labels,
requirements, capacity, conditions with their transition times and the
lifecycle events reconstructed from them. Deleted claims are found as
tombstones for 7 days.`,
		Example: `  nodewright describe nodeclaim default-7k2xq --cluster prod`,
	}
	var tf tableFlags
	nc := &cobra.Command{
		Use:     "nodeclaim NAME",
		Aliases: []string{"nodeclaims", "nc"},
		Short:   "Describe one NodeClaim (live or deleted)",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			st, region, err := tf.open(ctx)
			if err != nil {
				return err
			}
			return runDescribeNodeClaim(ctx, cmd.OutOrStdout(), st, region, args[0], time.Now())
		},
	}
	tf.register(nc)
	cmd.AddCommand(nc)
	return cmd
}

func runDescribeNodeClaim(ctx context.Context, w io.Writer, st *store.Store, region, name string, now time.Time) error {
	c, err := inspect.LoadClaim(ctx, st, name)
	if err != nil {
		return err
	}
	prices, err := inspect.LoadPrices(ctx, st, region)
	if err != nil {
		return err
	}
	return inspect.WriteDescribe(w, c, prices, now)
}
