package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/queue"
)

// LifecycleHandler wires the lifecycle function's handler.
func (a *App) LifecycleHandler() (*lifecycle.Handler, error) {
	d, err := a.LifecycleDeps()
	if err != nil {
		return nil, err
	}
	return lifecycle.NewHandler(d)
}

// LifecycleDeps are the lifecycle's adapters: the store (claims, learned
// allocatable, the emptiness lease), the cluster, the EC2 provider
// (instance listing, termination, launch template GC), the configuration
// (NodePools' disruption settings) and, when configured, the work queue its
// requeues go through. Tests and the demo may wrap some of them (fault
// injection) or tune Settings before building a handler.
func (a *App) LifecycleDeps() (lifecycle.Deps, error) {
	if a.Store == nil || a.Kube == nil || a.EC2 == nil || a.Config == nil {
		return lifecycle.Deps{}, fmt.Errorf("lifecycle: the app lacks its store, cluster, EC2 provider or configuration")
	}
	d := lifecycle.Deps{
		Store:   a.Store,
		Cluster: a.Kube,
		Cloud:   a.EC2,
		Config:  a.Config,
		Metrics: a.Metrics,
		Log:     a.Log,
		Now:     a.Now,
		Holder:  lifecycleHolder(),
		Settings: lifecycle.Settings{
			GCMaxShare: a.Settings.GCMaxShare, GCMaxInstances: a.Settings.GCMaxInstances,
		},
	}
	if a.Work != nil {
		d.Requeue = func(ctx context.Context, msg queue.Message, delay time.Duration) error {
			return a.Work.Send(ctx, msg, delay)
		}
	} else {
		a.Log.Warn("no work queue configured: lifecycle follow-ups wait for the schedule")
	}
	return d, nil
}

// lifecycleHolder identifies this execution environment in leases (Lambda's
// log stream names one).
func lifecycleHolder() string {
	if s := os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"); s != "" {
		return "lifecycle/" + s
	}
	h, _ := os.Hostname()
	return fmt.Sprintf("lifecycle/%s/%d", h, os.Getpid())
}
