package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/inspect"
	"github.com/nodewright/nodewright/internal/store"
)

func newDescribeCmd() *cobra.Command {
	return resourceVerb(&cobra.Command{
		Use:   "describe nodeclaim NAME",
		Short: "Show one NodeClaim: where it runs, its conditions, its lifecycle and why it was disrupted",
		Long: `Describe prints one NodeClaim from the nodewright table the way
'kubectl describe nodeclaim' lays it out: identity and placement, price, the
disruption decision (reason, message, when, drain deadline), labels,
requirements, capacity, conditions with their transition times and the
lifecycle events reconstructed from them. Deleted claims are found as
tombstones for 7 days. -o json|yaml prints the karpenter.sh/v1 NodeClaim
itself (as 'kubectl get nodeclaim NAME -o yaml'), -o name its name.`,
		Example: `  nodewright describe nodeclaim default-7k2xq --cluster prod
  nodewright describe nodeclaim default-7k2xq --cluster prod -o yaml`,
	}, "nodeclaim", newDescribeNodeClaimCmd())
}

func newDescribeNodeClaimCmd() *cobra.Command {
	var tf tableFlags
	var pf printFlags
	cmd := &cobra.Command{
		Use:     "nodeclaim NAME",
		Aliases: []string{"nodeclaims", "nc"},
		Short:   "Describe one NodeClaim (live or deleted)",
		Args:    exactlyOneName,
		RunE: tableRun(&tf, pf.check, func(ctx context.Context, cmd *cobra.Command, args []string, st *store.Store, region string) error {
			return runDescribeNodeClaim(ctx, cmd.OutOrStdout(), st, region, args[0], pf.Output, time.Now())
		}),
	}
	tf.register(cmd)
	pf.register(cmd, inspect.OutputJSON, inspect.OutputYAML, inspect.OutputName)
	return cmd
}

// exactlyOneName is cobra.ExactArgs(1) as a usage error.
func exactlyOneName(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usageError(fmt.Errorf("%s takes one NodeClaim name, got %d arguments", cmd.CommandPath(), len(args)))
	}
	return nil
}

func runDescribeNodeClaim(ctx context.Context, w io.Writer, st *store.Store, region, name, output string, now time.Time) error {
	c, err := inspect.LoadClaim(ctx, st, name)
	if err != nil {
		return err
	}
	switch output {
	case inspect.OutputJSON, inspect.OutputYAML:
		return inspect.WriteObject(w, output, inspect.NodeClaimObject(c))
	case inspect.OutputName:
		_, err := fmt.Fprintln(w, inspect.NodeClaimName(c.Name))
		return err
	}
	prices, err := inspect.LoadPrices(ctx, st, region)
	if err != nil {
		return err
	}
	return inspect.WriteDescribe(w, c, prices, now)
}
