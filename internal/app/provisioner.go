package app

import (
	"context"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
)

// ProvisionerHandler wires the provisioner function's handler.
func (a *App) ProvisionerHandler() (*provisioning.Handler, error) {
	d, err := a.ProvisionerDeps()
	if err != nil {
		return nil, err
	}
	return provisioning.NewHandler(d)
}

// ProvisionerDeps are the provisioner's adapters: the store (lease, claims,
// last run), the cluster, the EC2 launch path, the catalog with prices (the
// embedded catalog when EC2 cannot be read), the shared ICE set and, when
// configured, the lifecycle's work queue for post-launch checks. Tests and
// the demo may wrap some of them (fault injection) before building a handler.
func (a *App) ProvisionerDeps() (provisioning.Deps, error) {
	if a.Store == nil || a.Kube == nil || a.EC2 == nil || a.Config == nil {
		return provisioning.Deps{}, fmt.Errorf("provisioner: the app lacks its store, cluster, EC2 provider or configuration")
	}
	d := provisioning.Deps{
		Store:       a.Store,
		Cluster:     a.Kube,
		Launcher:    a.EC2,
		Catalog:     provisioning.ProviderCatalog(a.EC2, awsstore.Prices{Store: a.Store}, a.AWSConfig.Region, a.Log),
		Unavailable: provisioning.ProviderICE(a.EC2),
		Config:      a.Config,
		Metrics:     a.Metrics,
		Log:         a.Log,
		Now:         a.Now,
		Settings: provisioning.Settings{
			BatchIdle: a.Settings.BatchIdle,
			BatchMax:  a.Settings.BatchMax,
		},
	}
	if a.Work != nil {
		d.Requeue = func(ctx context.Context, msg queue.Message, delay time.Duration) error {
			return a.Work.Send(ctx, msg, delay)
		}
	}
	return d, nil
}
