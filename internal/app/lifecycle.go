package app

import (
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// LifecycleHandler wires the lifecycle function's handler.
func (a *App) LifecycleHandler() (*lifecycle.Handler, error) {
	return handler(a.LifecycleDeps, lifecycle.NewHandler)
}

// LifecycleDeps are the lifecycle's adapters: the store (claims, learned
// allocatable, the emptiness lease), the cluster, the EC2 provider
// (instance listing, termination, launch template GC), the configuration
// (NodePools' disruption settings) and, when configured, the work queue its
// requeues go through. Tests and the demo may wrap some of them (fault
// injection) or tune Settings before building a handler.
func (a *App) LifecycleDeps() (lifecycle.Deps, error) {
	if err := a.requireAdapters("lifecycle"); err != nil {
		return lifecycle.Deps{}, err
	}
	return lifecycle.Deps{
		Store:   a.Store,
		Cluster: a.Kube,
		Cloud:   a.EC2,
		Requeue: a.requeue("no work queue configured: lifecycle follow-ups wait for the schedule"),
		Config:  a.Config,
		Metrics: a.Metrics,
		Log:     a.Log,
		Now:     a.Now,
		Holder:  holder("lifecycle"),
		Settings: lifecycle.Settings{
			GCMaxShare: a.Settings.GCMaxShare, GCMaxInstances: a.Settings.GCMaxInstances,
			NodeRepair: a.Settings.FeatureGates.NodeRepair,
		},
	}, nil
}
