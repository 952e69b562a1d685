package app

import (
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// LifecycleDeps are the lifecycle's adapters: the store (claims, learned
// allocatable, the emptiness lease), the cluster, the EC2 provider
// (instance listing, termination, launch template GC), the configuration
// (NodePools' disruption settings) and, when configured, the work queue its
// requeues go through. Tests and the demo may wrap some of them (fault
// injection) or tune Settings before building a handler.
func (a *App) LifecycleDeps() (lifecycle.Deps, error) {
	return deps(a, "lifecycle", func() (lifecycle.Deps, error) {
		return lifecycle.Deps{
			Store: a.Store, Cluster: a.Cluster, Cloud: a.Cloud, Config: a.Config, Metrics: a.Metrics, Log: a.Log, Now: a.Now,
			Requeue:   a.requeue("no work queue configured: lifecycle follow-ups wait for the schedule"),
			Provision: a.nudge(),
			Holder:    holder("lifecycle"),
			Settings: lifecycle.Settings{GCMaxShare: a.Settings.GCMaxShare, GCMaxInstances: a.Settings.GCMaxInstances,
				NodeRepair: a.Settings.FeatureGates.NodeRepair},
			ImpairedInstances: a.EC2.ImpairedInstances,
		}, nil
	})
}

// LifecycleHandler wires the lifecycle function's handler.
func (a *App) LifecycleHandler() (*lifecycle.Handler, error) {
	return handler(a.LifecycleDeps, lifecycle.NewHandler)
}
