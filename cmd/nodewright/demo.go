package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/demo"
)

// newDemoCmd is `nodewright demo` (`make demo`): the provisioning demo on
// the local cloud through the real function handlers.
func newDemoCmd() *cobra.Command {
	var o demo.Options
	var logPath string
	var faults lambdaFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Scale a Deployment from 0 to N and back on the local cloud through nodewright's real functions",
		Long: `Start the local cloud (a real kube-apiserver with KWOK nodes, dynalite and
nodewright's AWS simulator; the first run builds them, later runs take
seconds), create the stack's table, queues and rules, load the default
NodePool and EC2NodeClass of infra/examples/default (adapted to the local
cloud), register the admission webhook with the API server and run the
functions' handlers on the events AWS would deliver, as Lambda runs them with
the synthesized stack's settings (reserved concurrency and throttles,
asynchronous retries, timeouts, cold starts, duplicate and delayed
deliveries), while the inflate Deployment of infra/examples/workloads scales
to --replicas and back to 0. Prints a timeline and ends with one line:

  DEMO OK pods=<n> running=<n> nodes=<n> cost_per_hour=<$> time_to_running_s=<s> scale_down_s=<s>
    faults=<random faults' rates> lambda=<throttles, retries, expired events, timeouts,
    cold starts, duplicates, delayed events counted> iam=<enforced|off> denied=<n>

or says what failed and exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			o.Out = out
			o.Progress = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			if logPath != "" {
				f, err := os.Create(logPath)
				if err != nil {
					return err
				}
				defer f.Close()
				o.Logs = f
			} else {
				o.Logs = io.Discard
			}
			o.Lambda = faults.options()
			res, err := demo.Run(cmd.Context(), o)
			if err != nil {
				fmt.Fprintf(out, "DEMO FAILED: %v\n", err)
				if logPath == "" {
					fmt.Fprintln(cmd.ErrOrStderr(), "(run again with --logs FILE to keep the functions' JSON logs)")
				}
				return &exitError{code: 1, err: err}
			}
			fmt.Fprintln(out, res.Line())
			return nil
		},
	}
	cmd.Flags().IntVar(&o.Replicas, "replicas", 10, "how far the inflate Deployment scales")
	cmd.Flags().DurationVar(&o.Tick, "tick", 5*time.Second, "period of the functions' schedule (one minute in AWS)")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 5*time.Minute, "limit for each phase (scale-up to Running, scale-down to no nodes)")
	cmd.Flags().StringVar(&o.ConsolidationPolicy, "consolidation-policy", "WhenEmpty", "the demo NodePool's consolidationPolicy: WhenEmpty or WhenEmptyOrUnderutilized")
	cmd.Flags().BoolVar(&o.Burst, "burst", false, "create the pods at once instead of scaling the Deployment (measures batching without the ReplicaSet controller's pace)")
	cmd.Flags().StringVar(&logPath, "logs", "", "write the functions' JSON logs and EMF metrics to this file")
	faults.register(cmd)
	return cmd
}
