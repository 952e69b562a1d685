package app

import (
	"github.com/nodewright/nodewright/internal/provisioning"
)

// ProvisionerDeps are the provisioner's adapters: the store (lease, claims,
// last run), the cluster, the EC2 launch path, the catalog with prices (the
// embedded catalog when EC2 cannot be read), the shared ICE set and, when
// configured, the lifecycle's work queue for post-launch checks. Tests and
// the demo may wrap some of them (fault injection) before building a handler.
func (a *App) ProvisionerDeps() (provisioning.Deps, error) {
	return deps(a, "provisioner", func() (provisioning.Deps, error) {
		s := provisioning.Settings{BatchIdle: a.Settings.BatchIdle, BatchMax: a.Settings.BatchMax, Policy: a.policy()}
		if a.Settings.Shadow() {
			// Shadow mode learns each claim's pods from the Nominated
			// events, which cost it nothing: none is rate-limited.
			s.NominationEventRate = -1
		}
		return provisioning.Deps{
			Store: a.claims, Cluster: a.Cluster, Launcher: a.Cloud, Config: a.Config, Metrics: a.Metrics, Log: a.Log, Now: a.Now,
			Catalog:      a.catalog(),
			Unavailable:  provisioning.ProviderICE(a.EC2),
			Requeue:      a.requeue(""),
			RequeueBatch: a.requeueBatch(),
			Nudge:        a.nudge(),
			Settings:     s,
		}, nil
	})
}

// ProvisionerHandler wires the provisioner function's handler.
func (a *App) ProvisionerHandler() (*provisioning.Handler, error) {
	return handler(a.ProvisionerDeps, provisioning.NewHandler)
}
