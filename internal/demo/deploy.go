package demo

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localrun"
)

// setup writes the demo's configuration and starts nodewright on the local
// cloud as AWS runs it (internal/localrun).
func (d *run) setup(ctx context.Context) error {
	configDir, err := os.MkdirTemp("", "nodewright-demo-config-")
	if err != nil {
		return err
	}
	d.closers = append(d.closers, func() { _ = os.RemoveAll(configDir) })
	if err := writeConfig(configDir, d.cloud.ClusterName, d.o.ConsolidationPolicy); err != nil {
		return fmt.Errorf("write the demo NodePool/EC2NodeClass: %w", err)
	}
	if err := d.loadConfig(configDir); err != nil {
		return err
	}
	d.sys, err = localrun.Start(ctx, d.cloud, localrun.Options{ConfigDir: configDir, Name: "nodewright-demo", Tick: d.o.Tick,
		RegistrationCheck: d.o.RegistrationCheck, Timeline: d.tl, Logs: d.o.Logs, Lambda: d.o.Lambda})
	return err
}

// loadConfig loads the demo's NodePool and EC2NodeClass as the functions
// will, and prints the pool's disruption settings.
func (d *run) loadConfig(configDir string) error {
	cfg, err := apis.Load(configDir)
	if err != nil {
		return fmt.Errorf("load the demo configuration: %w", err)
	}
	np := cfg.NodePool("default")
	if np == nil {
		return errors.New("the demo configuration has no NodePool default")
	}
	after, _ := np.Spec.Disruption.ConsolidateAfter.Get()
	d.tl.Printf("NodePool default (%s, consolidateAfter %s) and EC2NodeClass default (al2023@latest) loaded from infra/examples/default",
		np.Spec.Disruption.ConsolidationPolicy, after)
	return nil
}
