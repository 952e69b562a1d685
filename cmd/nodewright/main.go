// Command nodewright is the operator's CLI: it validates Karpenter
// configuration, simulates provisioning plans, runs the local cloud and shows
// what the serverless controllers are doing.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		os.Exit(exitCode(err))
	}
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "nodewright",
		Short:         "Serverless, Karpenter-compatible node autoscaling for Amazon EKS",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(subcommands()...)
	return root
}

// exitError carries a specific process exit code (validate exits 1 on bad
// input without printing cobra's usage banner).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	fmt.Fprintln(os.Stderr)
	return 1
}
