package app

import (
	"context"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/termination"
)

// InterruptionHandler wires the interruption function: the store (claims,
// the shared ICE set behind the EC2 provider), the cluster, the termination
// workflow, a provisioner over the same adapters as the provisioner
// function (replacement capacity goes through its lease, solver and launch
// path) and, when configured, the work queue that hands drains to the
// lifecycle.
func (a *App) InterruptionHandler() (*interruption.Handler, error) {
	d, err := a.InterruptionDeps()
	if err != nil {
		return nil, err
	}
	return interruption.NewHandler(d)
}

// InterruptionDeps are the interruption controller's adapters; tests and
// the demo may wrap some of them before building a handler.
func (a *App) InterruptionDeps() (interruption.Deps, error) {
	if a.Store == nil || a.Kube == nil || a.EC2 == nil || a.Config == nil {
		return interruption.Deps{}, fmt.Errorf("interruption: the app lacks its store, cluster, EC2 provider or configuration")
	}
	term, err := termination.New(termination.Deps{Store: a.Store, Cluster: a.Kube, Cloud: a.EC2, Metrics: a.Metrics, Log: a.Log, Now: a.Now})
	if err != nil {
		return interruption.Deps{}, err
	}
	pd, err := a.ProvisionerDeps()
	if err != nil {
		return interruption.Deps{}, err
	}
	// The pass exists to launch replacements now: a burst of unrelated
	// pending pods must not hold it in the provisioner's batching window
	// (the provisioner function batches those itself).
	if pd.Settings.BatchIdle <= 0 || pd.Settings.BatchIdle > interruptionBatchIdle {
		pd.Settings.BatchIdle = interruptionBatchIdle
	}
	if pd.Settings.BatchMax <= 0 || pd.Settings.BatchMax > interruptionBatchMax {
		pd.Settings.BatchMax = interruptionBatchMax
	}
	prov, err := provisioning.New(pd)
	if err != nil {
		return interruption.Deps{}, fmt.Errorf("interruption: provisioner: %w", err)
	}
	d := interruption.Deps{
		Store:      a.Store,
		Cluster:    a.Kube,
		Terminator: term,
		Cloud:      a.EC2,
		ICE:        a.EC2.ICE(),
		Provision:  prov.Pass(),
		Metrics:    a.Metrics,
		Log:        a.Log,
		Now:        a.Now,
		Settings:   interruption.Settings{Rebalance: a.Settings.Rebalance},
	}
	if a.Work != nil {
		d.Requeue = func(ctx context.Context, msg queue.Message, delay time.Duration) error {
			return a.Work.Send(ctx, msg, delay)
		}
	} else {
		a.Log.Warn("no work queue configured: drains continue on the lifecycle's schedule")
	}
	return d, nil
}

// Batching bounds of the interruption function's provisioning pass.
const (
	interruptionBatchIdle = 100 * time.Millisecond
	interruptionBatchMax  = time.Second
)
