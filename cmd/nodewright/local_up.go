package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localrun"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/simulation"
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
	faults    lambdaFlags
}

const localUpLong = `Start the local cloud and keep it running until Ctrl-C or ` + "`nodewright local down`" + `.

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
(karpenter.sh/discovery tags, zones, role).`

func newLocalUpCmd() *cobra.Command {
	f := &localUpFlags{}
	cmd := &cobra.Command{Use: "up", Args: cobra.NoArgs, Long: localUpLong}
	cmd.Short = "Start the local cloud (and with --config, nodewright on it) until Ctrl-C or `nodewright local down`"
	cmd.Example = "  nodewright local up --config infra/examples/spot-with-on-demand-fallback -v"
	cmd.RunE = func(cmd *cobra.Command, _ []string) error { return runLocalUp(cmd, f) }
	fl := cmd.Flags()
	fl.StringVar(&f.opts.Region, "region", "us-west-2", "AWS region the simulator pretends to be (with --config: the region of the NodePools' zones)")
	fl.StringVar(&f.opts.ClusterName, "cluster-name", "local", "name of the simulated EKS cluster (with --config: the EC2NodeClasses' karpenter.sh/discovery tag)")
	fl.StringSliceVar(&f.only, "only", nil, "run only these components: controlplane, dynamodb, aws (default all; not with --config)")
	fl.StringVar(&f.configDir, "config", "", "run nodewright with the NodePools and EC2NodeClasses of this directory")
	fl.DurationVar(&f.interval, "interval", 5*time.Second, "with --config: how often to print the status line")
	fl.DurationVar(&f.tick, "tick", 5*time.Second, "with --config: period of the functions' schedules (one minute in AWS)")
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "with --config: stream the functions' timeline (launches, registrations, disruptions, interruptions)")
	fl.StringVar(&f.logPath, "logs", "", "with --config: write the functions' JSON logs and EMF metrics to this file")
	f.faults.register(cmd)
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
	out := cmd.OutOrStdout()
	// The status lines and the functions' timeline share one stamped,
	// serialized printer.
	tl := localrun.NewTimeline(out, time.Now())
	var extras localcloud.Extras
	var sys *localrun.System
	if f.configDir != "" {
		var stop func()
		if sys, extras, stop, err = startSystem(ctx, c, f, target.NodeRole, tl); err != nil {
			return err
		}
		defer stop()
	}
	if _, err := localcloud.SaveState(c, extras); err != nil {
		return err
	}
	defer localcloud.RemoveState()
	printReady(out, c, append(c.Env(), extras.Env...), sys != nil)
	if sys != nil {
		watchStatus(ctx, tl, c, f.interval)
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
	if r := simulation.ZoneRegion(cfg); r != "" && !cmd.Flags().Changed("region") {
		o.Region = r
	}
	if t.NodeRole == "" {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: the EC2NodeClasses name no single role; the local stack passes KarpenterNodeRole-%s\n", o.ClusterName)
	}
	return t
}

// startSystem runs nodewright on c and serves the fault buttons; stop
// undoes both.
func startSystem(ctx context.Context, c *localcloud.Cloud, f *localUpFlags, nodeRole string, status *localrun.Timeline) (*localrun.System, localcloud.Extras, func(), error) {
	var x localcloud.Extras
	var tl *localrun.Timeline // the functions' lines only with -v
	if f.verbose {
		tl = status
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
	// The simulated kubelet joins within seconds: a short registration
	// follow-up shows nodes Ready sooner than the function's 30 s default.
	sys, err := localrun.Start(ctx, c, localrun.Options{ConfigDir: f.configDir, Name: "nodewright-local", Tick: f.tick,
		RegistrationCheck: 3 * time.Second, NodeRole: nodeRole, Timeline: tl, Logs: logs, Volumes: true, Lambda: f.faults.options()})
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

func printReady(out io.Writer, c *localcloud.Cloud, env []string, running bool) {
	fmt.Fprintf(out, "# local cloud ready in %s\n", c.StartupTimes["total"].Round(time.Millisecond))
	if c.Kubeconfig != "" {
		fmt.Fprintf(out, "# kubeconfig: %s\n", c.Kubeconfig)
	}
	if running {
		fmt.Fprintf(out, "# nodewright runs on EKS cluster %s in %s (local cloud)\n", c.ClusterName, c.Region)
	}
	fmt.Fprintln(out, "# use it from another shell with: eval \"$(nodewright local env)\"")
	writeEnv(out, env)
	if c.Plane != nil && c.Plane.Kubectl != "" {
		writePath(out, filepath.Dir(c.Plane.Kubectl))
	}
	fmt.Fprintln(out, "# Ctrl-C or `nodewright local down` stops it")
}

// watchStatus prints the status line every interval until ctx ends.
func watchStatus(ctx context.Context, tl *localrun.Timeline, c *localcloud.Cloud, interval time.Duration) {
	if interval <= 0 {
		return
	}
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(interval):
			st, err := localrun.CurrentStatus(ctx, c)
			switch {
			case ctx.Err() != nil:
			case err != nil:
				tl.Printf("%-12s %v", "status", err)
			default:
				tl.Printf("%-12s %s", "status", st)
			}
		}
	}
}
