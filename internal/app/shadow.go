package app

import (
	"context"
	"encoding/json"
	"os"

	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/shadow"
)

// clusterClient is what every controller acts on the cluster through:
// *kube.Client, or in shadow mode *shadow.Cluster.
type clusterClient interface {
	provisioning.Cluster
	lifecycle.Cluster
	disruption.Cluster
	interruption.Cluster
}

// cloudClient is what every controller acts on EC2 through: *aws.Provider,
// or in shadow mode *shadow.Cloud.
type cloudClient interface {
	provisioning.Launcher
	lifecycle.Cloud
	lifecycle.TemplateGC
	disruption.Cloud
}

// wireActing sets the adapters the controllers act through. This is the
// one place shadow mode (settings.ModeShadow) changes the wiring: every
// write to the cluster and to EC2 goes to an adapter that makes none, the
// provisioner's NodeClaims stay in memory, and what the passes decide is
// recorded in the table. No controller knows which mode it runs in.
func (a *App) wireActing() {
	a.Cluster, a.Cloud, a.claims = a.Kube, a.EC2, a.Store
	if !a.Settings.Shadow() {
		return
	}
	a.Shadow = &shadow.Recorder{Store: a.Store, Function: a.function, Now: a.Now}
	a.Cluster = &shadow.Cluster{Client: a.Kube, Recorder: a.Shadow}
	a.Cloud = &shadow.Cloud{Provider: a.EC2, Recorder: a.Shadow}
	a.claims = &shadow.Claims{Store: a.Store, Now: a.Now}
	a.Log.Info("shadow mode: nothing is launched, terminated, tainted, evicted or patched; decisions are recorded in the table")
}

// ShadowFleet is the disruption function's handler in shadow mode: the
// disruption decision over every node, recorded and never executed.
func (a *App) ShadowFleet() (*shadow.Fleet, error) {
	return deps(a, "disruption", func() (*shadow.Fleet, error) {
		s, err := disruption.SettingsFromEnv(os.Getenv)
		if err != nil {
			return nil, err
		}
		s.SpotToSpotConsolidation = a.Settings.FeatureGates.SpotToSpotConsolidation
		s.Policy = a.policy()
		return shadow.NewFleet(shadow.FleetDeps{
			Cluster: a.Cluster, Store: a.Store, Config: a.Config, Log: a.Log, Now: a.Now, Settings: s,
			Catalog:     a.catalog(),
			Unavailable: provisioning.ProviderICE(a.EC2),
		})
	})
}

// HandlerFunc is a Handler with the Handle method Run starts.
type HandlerFunc func(ctx context.Context, raw json.RawMessage) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	return f(ctx, raw)
}

// DisruptionFunction is the disruption function's handler: ShadowFleet in
// shadow mode, else DisruptionHandler's.
func (a *App) DisruptionFunction() (HandlerFunc, error) {
	if a.Settings.Shadow() {
		f, err := a.ShadowFleet()
		if err != nil {
			return nil, err
		}
		return f.Handle, nil
	}
	h, err := a.DisruptionHandler()
	if err != nil {
		return nil, err
	}
	return h.Handle, nil
}

// Wrap is what Run hands Lambda: h, then in shadow mode the recording of
// what it would have launched, counted by WithHeartbeat.
func (a *App) Wrap(h Handler) Handler {
	if a.Shadow != nil {
		inner := h
		h = func(ctx context.Context, raw json.RawMessage) (any, error) {
			out, err := inner(ctx, raw)
			if ferr := a.Shadow.Flush(ctx); ferr != nil {
				a.Log.WarnContext(ctx, "recording the shadow decision", "error", ferr)
			}
			return out, err
		}
	}
	return WithHeartbeat(a.Metrics, a.Log, h)
}
