package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/karpenter/pkg/operator/logging"
)

const usage = `usage:
  karpentercompare plan --config FILE|DIR --workload FILE [--nodes FILE] [--catalog DIR|builtin] [--region R] [-o json|table] [--side-by-side]
  karpentercompare compare (same flags as plan; prints both plans' summary)
  karpentercompare bench [--scenarios DIR] [--catalog DIR] [--region R] [--runs N] [--diverse 5000,20000] [-o table|json]`

// Karpenter logs through controller-runtime; its scheduling logs would drown
// the output, and an unset logger makes controller-runtime warn. Set in init
// so the tests, which call run directly, get it too.
func init() {
	log.SetLogger(logging.NopLogger)
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "karpentercompare:", err)
		}
		os.Exit(2)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return fmt.Errorf("missing command")
	}
	switch args[0] {
	case "plan":
		return runPlan(args[1:], stdout, stderr, false)
	case "compare":
		return runPlan(args[1:], stdout, stderr, true)
	case "bench":
		return runBench(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}
