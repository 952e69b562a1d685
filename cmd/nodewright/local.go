package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/localcloud"
)

// newLocalCmd is `nodewright local up|down|env`: the local cloud for people,
// used from other shells through the printed environment.
func newLocalCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "local",
		Short: "Run the local cloud (Kubernetes control plane, DynamoDB, AWS simulator) on this machine",
		Long: `Run the local cloud the tests use: a real kube-apiserver with KWOK fake
kubelets, dynalite for DynamoDB and nodewright's AWS wire-protocol simulator,
all on 127.0.0.1. The first start builds the control plane from the Go module
proxy (several minutes); later starts take seconds.`,
	}
	cmd.AddCommand(newLocalUpCmd(), newLocalDownCmd(), newLocalEnvCmd(), newLocalPrepareCmd())
	cmd.AddCommand(newLocalFaultCmds()...)
	return cmd
}

func newLocalPrepareCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "prepare",
		Short: "Build the control plane and install dynalite into the cache without starting anything",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			start := time.Now()
			if err := localcloud.Prepare(cmd.Context(), logger); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "local cloud prepared in %s\n", time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
}

func newLocalDownCmd() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local cloud started by `nodewright local up`",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := localcloud.LoadState()
			if errors.Is(err, localcloud.ErrNotRunning) {
				fmt.Fprintln(cmd.ErrOrStderr(), "no local cloud is running")
				return nil
			}
			if err != nil {
				return err
			}
			if err := st.Stop(timeout); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "stopped the local cloud (pid %d)\n", st.PID)
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", 30*time.Second, "how long to wait for a clean shutdown before killing")
	return cmd
}

func newLocalEnvCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "env",
		Short: "Print the environment for using the running local cloud: KUBECONFIG, kubectl on PATH, AWS endpoints, the table (eval \"$(nodewright local env)\")",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := localcloud.LoadState()
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			writeEnv(cmd.OutOrStdout(), st.Env)
			writePath(cmd.OutOrStdout(), st.BinDir)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the whole state (pid, env, kubeconfig) as JSON")
	return cmd
}

func parseComponents(names []string) (localcloud.Components, error) {
	var c localcloud.Components
	for _, n := range names {
		switch strings.ToLower(strings.TrimSpace(n)) {
		case "controlplane", "control-plane", "kube", "kubernetes":
			c |= localcloud.ControlPlane
		case "dynamodb", "dynalite":
			c |= localcloud.DynamoDB
		case "aws", "awssim", "simulator":
			c |= localcloud.AWS
		default:
			return 0, fmt.Errorf("--only: unknown component %q (want controlplane, dynamodb or aws)", n)
		}
	}
	return c, nil
}

// writeEnv prints KEY=VALUE pairs as POSIX shell exports.
func writeEnv(w io.Writer, env []string) {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(w, "export %s=%s\n", k, shellQuote(v))
	}
}

// writePath puts dir (kubectl's) first on PATH.
func writePath(w io.Writer, dir string) {
	if dir != "" {
		fmt.Fprintf(w, "export PATH=%s:\"$PATH\"\n", shellQuote(dir))
	}
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
