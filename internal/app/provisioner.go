package app

import (
	"context"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// ProvisionerHandler wires the provisioner: the store (lease, claims, last
// run), the cluster, the EC2 launch path, the catalog with prices (the
// embedded catalog when EC2 cannot be read), the shared ICE set and, when
// configured, the lifecycle's work queue for post-launch checks.
func (a *App) ProvisionerHandler() (*provisioning.Handler, error) {
	if a.Store == nil || a.Kube == nil || a.EC2 == nil || a.Config == nil {
		return nil, fmt.Errorf("provisioner: the app lacks its store, cluster, EC2 provider or configuration")
	}
	prices := awsstore.Prices{Store: a.Store}
	region := a.AWSConfig.Region
	d := provisioning.Deps{
		Store:    a.Store,
		Cluster:  a.Kube,
		Launcher: a.EC2,
		Catalog: func(ctx context.Context) (*catalog.Catalog, error) {
			cat, err := a.EC2.Catalog(ctx, prices)
			if err == nil {
				return cat, nil
			}
			a.Log.WarnContext(ctx, "instance types from EC2 unavailable; planning with the embedded catalog", "error", err)
			builtin, berr := catalog.Builtin(region)
			if berr != nil {
				return nil, fmt.Errorf("%w; embedded catalog: %w", err, berr)
			}
			return builtin, nil
		},
		Unavailable: func(ctx context.Context) (map[scheduling.OfferingKey]bool, error) {
			ice := a.EC2.ICE()
			err := ice.Sync(ctx, 0)
			out := map[scheduling.OfferingKey]bool{}
			for k := range ice.Snapshot() {
				out[scheduling.OfferingKey{InstanceType: k.InstanceType, Zone: k.Zone, CapacityType: k.CapacityType}] = true
			}
			return out, err
		},
		Config:  a.Config,
		Metrics: a.Metrics,
		Log:     a.Log,
		Now:     a.Now,
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
	return provisioning.NewHandler(d)
}
