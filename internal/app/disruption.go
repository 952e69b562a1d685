package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
)

// DisruptionHandler wires the disruption function's handler.
func (a *App) DisruptionHandler() (*disruption.Handler, error) {
	d, err := a.DisruptionDeps()
	if err != nil {
		return nil, err
	}
	return disruption.NewHandler(d)
}

// DisruptionDeps are the disruption controller's adapters: the store
// (lease, pending command, claims), the cluster, the EC2 provider (drift of
// AMIs, subnets and security groups), the catalog and ICE set the
// provisioner plans with, a provisioner over the same adapters for
// replacements, and the lifecycle's work queue for drains. Tests and the
// demo may wrap some of them or tune Settings before building a handler.
func (a *App) DisruptionDeps() (disruption.Deps, error) {
	if a.Store == nil || a.Kube == nil || a.EC2 == nil || a.Config == nil {
		return disruption.Deps{}, fmt.Errorf("disruption: the app lacks its store, cluster, EC2 provider or configuration")
	}
	pd, err := a.ProvisionerDeps()
	if err != nil {
		return disruption.Deps{}, err
	}
	prov, err := provisioning.New(pd)
	if err != nil {
		return disruption.Deps{}, fmt.Errorf("disruption: provisioner: %w", err)
	}
	s, err := disruption.SettingsFromEnv(os.Getenv)
	if err != nil {
		return disruption.Deps{}, err
	}
	d := disruption.Deps{
		Store:       a.Store,
		Cluster:     a.Kube,
		Cloud:       a.EC2,
		Catalog:     provisioning.ProviderCatalog(a.EC2, awsstore.Prices{Store: a.Store}, a.AWSConfig.Region, a.Log),
		Unavailable: provisioning.ProviderICE(a.EC2),
		Provision:   prov.Pass(),
		Config:      a.Config,
		Metrics:     a.Metrics,
		Log:         a.Log,
		Now:         a.Now,
		Holder:      disruptionHolder(),
		Settings:    s,
	}
	if a.Work != nil {
		d.Requeue = func(ctx context.Context, msg queue.Message, delay time.Duration) error {
			return a.Work.Send(ctx, msg, delay)
		}
	} else {
		a.Log.Warn("no work queue configured: drains start on the lifecycle's schedule")
	}
	return d, nil
}

// holder identifies this execution environment in leases (Lambda's log
// stream names one).
func disruptionHolder() string {
	if s := os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"); s != "" {
		return "disruption/" + s
	}
	h, _ := os.Hostname()
	return fmt.Sprintf("disruption/%s/%d", h, os.Getpid())
}
