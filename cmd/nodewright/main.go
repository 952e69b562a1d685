// Command nodewright is the operator's CLI: it validates Karpenter
// configuration, simulates provisioning plans, runs the local cloud and shows
// what the serverless controllers are doing.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes, as documented in the root command's help and the README.
const (
	exitOK = 0
	// exitFailure: the command ran and failed (AWS unreachable, claim not
	// found, invalid configuration).
	exitFailure = 1
	// exitUsage: the command line is wrong (unknown command or flag, bad
	// arguments, a bad -o value); nothing was done.
	exitUsage = 2
	// exitUnschedulable: simulate's plan leaves pods unschedulable, so CI
	// can gate a change on it.
	exitUnschedulable = 3
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, newRootCmd(), os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "nodewright",
		Short: "Serverless, Karpenter-compatible node autoscaling for Amazon EKS",
		Long: `nodewright is the CLI of the serverless, Karpenter-compatible node autoscaler
for Amazon EKS. It follows kubectl's conventions: data goes to stdout,
messages for people (warnings, "No resources found", errors) to stderr.

Exit codes:
  0  success
  1  the command failed (AWS, the table, the configuration)
  2  usage error: unknown command or flag, bad arguments, bad -o value
  3  simulate: the plan leaves pods unschedulable`,
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(subcommands()...)
	classifyErrors(root)
	return root
}

// execute runs the CLI with args and returns its exit code. Errors are
// printed by cobra ("Error: ..."); usage errors add where to find help.
func execute(ctx context.Context, root *cobra.Command, args []string, stdout, stderr io.Writer) int {
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	// A command printing its own errors (validate) prints its usage too.
	if code == exitUsage && cmd != nil && !cmd.SilenceErrors {
		fmt.Fprintf(stderr, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	return code
}

// exitError carries a specific process exit code (validate exits 1 on bad
// input without printing cobra's usage banner).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks err as a mistake in the command line (exit 2).
func usageError(err error) error { return &exitError{code: exitUsage, err: err} }

// exitCode maps an error to the process's exit code: a coded error keeps
// its code; any other error did not come from a command's RunE (see
// classifyErrors), so cobra rejected the command line.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitUsage
}

// classifyErrors wraps every command's RunE so that its errors exit 1
// unless they carry a code. Cobra's own errors (unknown flag or command,
// argument count, missing required flag) are returned before RunE runs and
// so stay unwrapped: usage errors. Wrapping here covers every command,
// including those added later, without each one deciding.
func classifyErrors(cmd *cobra.Command) {
	if run := cmd.RunE; run != nil {
		cmd.RunE = func(c *cobra.Command, args []string) error {
			err := run(c, args)
			var ee *exitError
			if err == nil || errors.As(err, &ee) {
				return err
			}
			return &exitError{code: exitFailure, err: err}
		}
	}
	for _, sub := range cmd.Commands() {
		classifyErrors(sub)
	}
}
