package app

import (
	"time"

	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/termination"
)

// InterruptionDeps are the interruption controller's adapters: the store
// (claims, the shared ICE set behind the EC2 provider), the cluster, the
// termination workflow, a provisioner over the same adapters as the
// provisioner function (replacement capacity goes through its lease, solver
// and launch path) and, when configured, the work queue that hands drains
// to the lifecycle. Tests and the demo may wrap some of them before
// building a handler.
func (a *App) InterruptionDeps() (interruption.Deps, error) {
	return deps(a, "interruption", func() (interruption.Deps, error) {
		term, err := termination.New(termination.Deps{Store: a.Store, Cluster: a.Cluster, Cloud: a.Cloud, Metrics: a.Metrics, Log: a.Log, Now: a.Now})
		if err != nil {
			return interruption.Deps{}, err
		}
		pass, err := a.replacementPass("interruption", interruptionBatching)
		if err != nil {
			return interruption.Deps{}, err
		}
		return interruption.Deps{
			Store: a.Store, Cluster: a.Cluster, Cloud: a.Cloud, Metrics: a.Metrics, Log: a.Log, Now: a.Now,
			Terminator: term,
			Instances:  a.EC2,
			ICE:        a.EC2.ICE(),
			Provision:  pass,
			Requeue:    a.requeue("no work queue configured: drains continue on the lifecycle's schedule"),
			Nudge:      a.nudge(),
			Settings:   interruption.Settings{Rebalance: a.Settings.Rebalance},
		}, nil
	})
}

// InterruptionHandler wires the interruption function's handler.
func (a *App) InterruptionHandler() (*interruption.Handler, error) {
	return handler(a.InterruptionDeps, interruption.NewHandler)
}

// Batching bounds of the interruption function's provisioning pass.
const (
	interruptionBatchIdle = 100 * time.Millisecond
	interruptionBatchMax  = time.Second
)

// interruptionBatching caps the pass's batching window: the pass exists to
// launch replacements now, and a burst of unrelated pending pods must not
// hold it in the window (the provisioner function batches those itself).
func interruptionBatching(s *provisioning.Settings) {
	if s.BatchIdle <= 0 || s.BatchIdle > interruptionBatchIdle {
		s.BatchIdle = interruptionBatchIdle
	}
	if s.BatchMax <= 0 || s.BatchMax > interruptionBatchMax {
		s.BatchMax = interruptionBatchMax
	}
}
