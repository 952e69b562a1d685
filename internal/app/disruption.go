package app

import (
	"os"

	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/provisioning"
)

// DisruptionDeps are the disruption controller's adapters: the store
// (lease, pending command, claims), the cluster, the EC2 provider (drift of
// AMIs, subnets and security groups), the catalog and ICE set the
// provisioner plans with, a provisioner over the same adapters for
// replacements, the lifecycle's work queue for drains and the disruption
// queue for its own wake-ups. Tests and the demo may wrap some of them or
// tune Settings before building a handler.
func (a *App) DisruptionDeps() (disruption.Deps, error) {
	return deps(a, "disruption", func() (disruption.Deps, error) {
		pass, err := a.replacementPass("disruption", nil)
		if err != nil {
			return disruption.Deps{}, err
		}
		s, err := disruption.SettingsFromEnv(os.Getenv)
		if err != nil {
			return disruption.Deps{}, err
		}
		s.SpotToSpotConsolidation = a.Settings.FeatureGates.SpotToSpotConsolidation
		s.Policy = a.policy()
		s.SchedulePeriod = a.Settings.DisruptionSchedule
		return disruption.Deps{
			Store: a.Store, Cluster: a.Cluster, Cloud: a.Cloud, Config: a.Config, Metrics: a.Metrics, Log: a.Log, Now: a.Now,
			Catalog:     a.catalog(),
			Unavailable: provisioning.ProviderICE(a.EC2),
			Provision:   pass,
			Requeue:     a.requeue("no work queue configured: drains start on the lifecycle's schedule"),
			Wakeup:      a.wakeup(),
			Holder:      holder("disruption"),
			Settings:    s,
		}, nil
	})
}

// DisruptionHandler wires the disruption function's handler.
func (a *App) DisruptionHandler() (*disruption.Handler, error) {
	return handler(a.DisruptionDeps, disruption.NewHandler)
}
