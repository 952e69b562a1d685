package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/inspect"
	"github.com/nodewright/nodewright/internal/store"
)

// printFlags are kubectl's printing flags: -o and --no-headers.
type printFlags struct {
	inspect.PrintOptions
	// allowed are the -o values the command takes (the table is always
	// allowed, as "" or its explicit name "table").
	allowed []string
}

func (p *printFlags) register(cmd *cobra.Command, allowed ...string) {
	p.allowed = allowed
	cmd.Flags().StringVarP(&p.Output, "output", "o", "", "output format: "+strings.Join(allowed, ", ")+" (default: a table)")
	cmd.Flags().BoolVar(&p.NoHeaders, "no-headers", false, "print tables without their header (and footer)")
}

// check rejects an -o value the command does not take: a usage error.
func (p *printFlags) check() error {
	if p.Output == "table" {
		p.Output = inspect.OutputTable
	}
	if err := inspect.CheckOutput(p.Output, p.allowed...); err != nil {
		return usageError(err)
	}
	return nil
}

// resourceVerb makes verb (get, describe, delete) a verb whose resources
// are subcommands: it adds them, and its RunE fails with a usage error
// naming kinds for a missing or unknown resource, as kubectl does (without
// it cobra prints the help and exits 0 for `get foo`).
func resourceVerb(verb *cobra.Command, kinds string, resources ...*cobra.Command) *cobra.Command {
	verb.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageError(fmt.Errorf("%s needs a resource type: %s", cmd.Name(), kinds))
		}
		return usageError(fmt.Errorf("unknown resource type %q for %s: use %s", args[0], cmd.Name(), kinds))
	}
	verb.AddCommand(resources...)
	return verb
}

// tableRun is the RunE of a command reading the nodewright table: check
// first (flags, so that usage errors come before any AWS call), then open
// the table and run.
func tableRun(tf *tableFlags, check func() error, run func(ctx context.Context, cmd *cobra.Command, args []string, st *store.Store, region string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(); err != nil {
			return err
		}
		ctx := cmd.Context()
		st, region, err := tf.open(ctx)
		if err != nil {
			return err
		}
		return run(ctx, cmd, args, st, region)
	}
}
