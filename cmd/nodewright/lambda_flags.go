package main

import (
	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/localrun"
)

// lambdaFlags set the random faults the local run injects (Lambda cold
// starts, duplicate deliveries, delayed events; localrun.LambdaOptions).
type lambdaFlags struct {
	seed uint64
	off  bool
}

func (f *lambdaFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.Uint64Var(&f.seed, "fault-seed", 1, "seed of the random Lambda, SQS and EventBridge faults (cold starts, duplicate deliveries, delayed events)")
	fl.BoolVar(&f.off, "no-faults", false, "no random faults: only the stack's own Lambda behaviour (reserved concurrency, retries, timeouts)")
}

func (f *lambdaFlags) options() localrun.LambdaOptions {
	o := localrun.LambdaOptions{}
	if f.off {
		o = localrun.NoFaults()
	}
	o.Seed = f.seed
	return o
}
