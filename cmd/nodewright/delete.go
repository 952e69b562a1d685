package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/inspect"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

func newDeleteCmd() *cobra.Command {
	return resourceVerb(&cobra.Command{
		Use:   "delete",
		Short: "Delete nodewright resources (kubectl delete for what nodewright keeps in DynamoDB)",
	}, "nodeclaim", newDeleteNodeClaimCmd())
}

// deleteOptions are delete nodeclaim's flags.
type deleteOptions struct {
	wait     bool
	timeout  time.Duration
	interval time.Duration
	// name prints each claim as nodeclaim.karpenter.sh/NAME (-o name).
	name bool
}

func newDeleteNodeClaimCmd() *cobra.Command {
	var tf tableFlags
	o := deleteOptions{interval: 2 * time.Second}
	var pf printFlags
	cmd := &cobra.Command{
		Use:     "nodeclaim NAME...",
		Aliases: []string{"nodeclaims"},
		Short:   "Gracefully delete NodeClaims: taint, drain respecting PDBs, terminate the instance",
		Long: "Marks each NodeClaim for deletion, as `kubectl delete nodeclaim` does with Karpenter. The lifecycle\n" +
			"function then taints its Node, drains it (evictions respect PodDisruptionBudgets; the NodePool's\n" +
			"terminationGracePeriod bounds the wait), terminates the instance and removes the Node, on its next\n" +
			"run (within a minute). With --wait (the default) the command returns once the claims are gone.",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(fmt.Errorf("%s needs at least one NodeClaim name", cmd.CommandPath()))
			}
			return nil
		},
		RunE: tableRun(&tf, pf.check, func(ctx context.Context, cmd *cobra.Command, args []string, st *store.Store, _ string) error {
			o.name = pf.Output == inspect.OutputName
			return runDeleteNodeClaims(ctx, cmd.OutOrStdout(), st, args, o, time.Now)
		}),
	}
	tf.register(cmd)
	cmd.Flags().StringVarP(&pf.Output, "output", "o", "", "name: print nodeclaim.karpenter.sh/NAME for each claim")
	pf.allowed = []string{inspect.OutputName}
	cmd.Flags().BoolVar(&o.wait, "wait", true, "wait until the claims are gone")
	cmd.Flags().DurationVar(&o.timeout, "timeout", 15*time.Minute, "how long --wait waits")
	return cmd
}

// deleteStore is what deleting needs of the table (*store.Store).
type deleteStore interface {
	termination.Marker
	GetNodeClaim(ctx context.Context, name string) (*apis.NodeClaim, error)
}

func runDeleteNodeClaims(ctx context.Context, w io.Writer, st deleteStore, names []string, o deleteOptions, now func() time.Time) error {
	for _, name := range names {
		_, newly, err := termination.Mark(ctx, st, name, apis.DeletionReasonManual, "deleted with nodewright delete nodeclaim", now())
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("nodeclaim %q not found", name)
		}
		if err != nil {
			return err
		}
		switch {
		case o.name:
			fmt.Fprintln(w, inspect.NodeClaimName(name))
		case !newly:
			fmt.Fprintf(w, "nodeclaim.karpenter.sh %q already being deleted\n", name)
		default:
			fmt.Fprintf(w, "nodeclaim.karpenter.sh %q deleted\n", name)
		}
	}
	if !o.wait {
		return nil
	}
	return waitGone(ctx, st, names, o)
}

// waitGone polls until every claim is tombstoned, as kubectl delete waits
// for an object's finalizers.
func waitGone(ctx context.Context, st deleteStore, names []string, o deleteOptions) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	for _, name := range names {
		for {
			_, err := st.GetNodeClaim(ctx, name)
			if errors.Is(err, store.ErrNotFound) {
				break
			}
			if err != nil && ctx.Err() == nil {
				return fmt.Errorf("wait for nodeclaim %s: %w", name, err)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("timed out waiting for nodeclaim %s to be terminated (it is still draining; see nodewright describe nodeclaim %s)", name, name)
			case <-time.After(o.interval):
			}
		}
	}
	return nil
}
