package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localrun"
	"github.com/nodewright/nodewright/internal/settings"
)

// localUpFlags are `local up`'s flags.
type localUpFlags struct {
	opts      localcloud.Options
	only      []string
	configDir string
	interval  time.Duration
	tick      time.Duration
	verbose   bool
	logPath   string
}

func newLocalUpCmd() *cobra.Command {
	var f localUpFlags
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the local cloud (and with --config, nodewright on it) until Ctrl-C or `nodewright local down`",
		Long: `Start the local cloud and keep it running until Ctrl-C or ` + "`nodewright local down`" + `.

With --config DIR, load the NodePools and EC2NodeClasses of DIR as
` + "`nodewright validate`" + ` does (a bad file stops here with FILE:LINE: FIELD:
MESSAGE), deploy the stack into the local cloud and run every function the
way AWS drives them: the admission webhook registered with the API server,
the provision, work, interruption and disruption queues as event sources and
the schedules. Apply workloads with kubectl from another shell after
` + "`eval \"$(nodewright local env)\"`" + `; a status line (pending pods, nodes by
NodePool and capacity type, $/h at the local cloud's prices) is printed every
--interval, and -v streams the functions' timeline. The cluster name, region
and node role default to what DIR's EC2NodeClasses and NodePools name
(karpenter.sh/discovery tags, zones, role).`,
		Example: `  nodewright local up --config infra/examples/spot-with-on-demand-fallback -v`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLocalUp(cmd, &f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.opts.Region, "region", "us-west-2", "AWS region the simulator pretends to be (with --config: the region of the NodePools' zones)")
	fl.StringVar(&f.opts.ClusterName, "cluster-name", "local", "name of the simulated EKS cluster (with --config: the EC2NodeClasses' karpenter.sh/discovery tag)")
	fl.StringSliceVar(&f.only, "only", nil, "run only these components: controlplane, dynamodb, aws (default all; not with --config)")
	fl.StringVar(&f.configDir, "config", "", "run nodewright with the NodePools and EC2NodeClasses of this directory")
	fl.DurationVar(&f.interval, "interval", 5*time.Second, "with --config: how often to print the status line")
	fl.DurationVar(&f.tick, "tick", 5*time.Second, "with --config: period of the functions' schedules (one minute in AWS)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "with --config: stream the functions' timeline (launches, registrations, disruptions, interruptions)")
	fl.StringVar(&f.logPath, "logs", "", "with --config: write the functions' JSON logs and EMF metrics to this file")
	return cmd
}

// runLocalUp is `local up`: check the configuration, start the cloud and
// nodewright on it, record the state for the other shells and wait.
func runLocalUp(cmd *cobra.Command, f *localUpFlags) error {
	comps, err := parseComponents(f.only)
	if err != nil {
		return usageError(err)
	}
	if f.configDir != "" && comps != 0 {
		return usageError(fmt.Errorf("--only and --config: nodewright needs every component"))
	}
	f.opts.Components = comps
	target := localrun.Target{}
	if f.configDir != "" {
		cfg, err := loadConfig(cmd.ErrOrStderr(), f.configDir)
		if err != nil {
			return err
		}
		target = applyTarget(cmd, &f.opts, cfg)
	}
	if st, err := localcloud.LoadState(); err == nil {
		return fmt.Errorf("a local cloud is already running (pid %d); stop it with `nodewright local down`", st.PID)
	}
	f.opts.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
	ctx := cmd.Context()
	c, err := localcloud.Start(ctx, f.opts)
	if err != nil {
		return err
	}
	defer c.Close()
	out := &syncWriter{w: cmd.OutOrStdout()}
	var extras localcloud.Extras
	var sys *localrun.System
	if f.configDir != "" {
		var stop func()
		if sys, extras, stop, err = startSystem(ctx, c, f, target.NodeRole, out); err != nil {
			return err
		}
		defer stop()
	}
	if _, err := localcloud.SaveState(c, extras); err != nil {
		return err
	}
	defer localcloud.RemoveState()
	printReady(out, c, localcloud.State{Env: append(c.Env(), extras.Env...)}, sys != nil)
	if sys != nil {
		watchStatus(ctx, out, c, f.interval)
	}
	<-ctx.Done() // main cancels the context on SIGINT/SIGTERM
	fmt.Fprintln(cmd.ErrOrStderr(), "stopping the local cloud")
	return nil
}

// applyTarget takes the cluster name and region from the configuration
// unless the flags name them.
func applyTarget(cmd *cobra.Command, o *localcloud.Options, cfg *apis.Config) localrun.Target {
	t := localrun.TargetOf(cfg)
	if t.ClusterName != "" && !cmd.Flags().Changed("cluster-name") {
		o.ClusterName = t.ClusterName
	}
	if t.Region != "" && !cmd.Flags().Changed("region") {
		o.Region = t.Region
	}
	if t.NodeRole == "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the EC2NodeClasses name no single role; the local stack passes KarpenterNodeRole-%s\n", o.ClusterName)
	}
	return t
}

// startSystem runs nodewright on c and serves the fault buttons; stop
// undoes both.
func startSystem(ctx context.Context, c *localcloud.Cloud, f *localUpFlags, nodeRole string, out io.Writer) (*localrun.System, localcloud.Extras, func(), error) {
	var x localcloud.Extras
	var tl *localrun.Timeline
	if f.verbose {
		tl = localrun.NewTimeline(out, time.Now())
	}
	logs := io.Discard
	var closeLogs func()
	if f.logPath != "" {
		lf, err := os.Create(f.logPath)
		if err != nil {
			return nil, x, nil, err
		}
		logs, closeLogs = lf, func() { _ = lf.Close() }
	}
	sys, err := localrun.Start(ctx, c, localrun.Options{ConfigDir: f.configDir, Name: "nodewright-local", Tick: f.tick,
		NodeRole: nodeRole, Timeline: tl, Logs: logs})
	if err != nil {
		if closeLogs != nil {
			closeLogs()
		}
		return nil, x, nil, err
	}
	ctl, err := localrun.StartControl(c, tl)
	if err != nil {
		sys.Close()
		return nil, x, nil, err
	}
	x.Control = ctl.URL()
	x.Env = []string{settings.EnvTableName + "=" + sys.Table}
	return sys, x, func() {
		_ = ctl.Close()
		sys.Close()
		if closeLogs != nil {
			closeLogs()
		}
	}, nil
}

func printReady(out io.Writer, c *localcloud.Cloud, st localcloud.State, running bool) {
	fmt.Fprintf(out, "# local cloud ready in %s\n", c.StartupTimes["total"].Round(time.Millisecond))
	if c.Kubeconfig != "" {
		fmt.Fprintf(out, "# kubeconfig: %s\n", c.Kubeconfig)
	}
	if running {
		fmt.Fprintf(out, "# nodewright runs on EKS cluster %s in %s (local cloud)\n", c.ClusterName, c.Region)
	}
	fmt.Fprintln(out, "# use it from another shell with: eval \"$(nodewright local env)\"")
	writeEnv(out, st.Env)
	fmt.Fprintln(out, "# Ctrl-C or `nodewright local down` stops it")
}

// watchStatus prints the status line every interval until ctx ends.
func watchStatus(ctx context.Context, out io.Writer, c *localcloud.Cloud, interval time.Duration) {
	if interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			st, err := localrun.CurrentStatus(ctx, c)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				fmt.Fprintf(out, "%s status: %v\n", now.Format("15:04:05"), err)
				continue
			}
			fmt.Fprintf(out, "%s %s\n", now.Format("15:04:05"), st)
		}
	}
}
