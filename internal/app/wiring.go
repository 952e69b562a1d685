package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/settings"
)

// The wiring every controller function shares. Each XDeps method is deps
// over a fill that spells out its Deps (the types differ per controller);
// these helpers build the values that are the same for all of them.

// handler builds a controller's Lambda handler from its Deps: the XHandler
// methods are deps then the package's NewHandler.
func handler[D, H any](deps func() (D, error), newHandler func(D) (H, error)) (H, error) {
	d, err := deps()
	if err != nil {
		var none H
		return none, err
	}
	return newHandler(d)
}

// deps is the body of every XDeps method: fill runs only once the App has
// the adapters every controller needs (function names the controller in
// the error).
func deps[D any](a *App, function string, fill func() (D, error)) (D, error) {
	if err := a.requireAdapters(function); err != nil {
		var none D
		return none, err
	}
	return fill()
}

// requireAdapters fails when the App lacks an adapter every controller needs
// (function names the controller in the error).
func (a *App) requireAdapters(function string) error {
	if a.Store == nil || a.Kube == nil || a.EC2 == nil || a.Config == nil {
		return fmt.Errorf("%s: the app lacks its store, cluster, EC2 provider or configuration", function)
	}
	return nil
}

// requeue is a Deps.Requeue over the lifecycle's work queue, or nil when no
// work queue is configured; then noQueue, when set, is logged as a warning
// saying what waits for the schedule instead.
func (a *App) requeue(noQueue string) func(ctx context.Context, msg queue.Message, delay time.Duration) error {
	if a.Work == nil {
		if noQueue != "" {
			a.Log.Warn(noQueue)
		}
		return nil
	}
	return func(ctx context.Context, msg queue.Message, delay time.Duration) error {
		return a.Work.Send(ctx, msg, delay)
	}
}

// requeueBatch is the provisioner's Requeue over the lifecycle's work queue
// (a pass's launches in SendMessageBatch calls), or nil when none is
// configured.
func (a *App) requeueBatch() func(ctx context.Context, msgs []queue.Message, delay time.Duration) error {
	if a.Work == nil {
		return nil
	}
	return a.Work.SendBatch
}

// nudge sends to the provision queue, or is nil (the provisioner's
// schedule does the work) when none is configured.
func (a *App) nudge() func(ctx context.Context, msg queue.Message, delay time.Duration) error {
	if a.Provision == nil {
		return nil
	}
	return a.Provision.Send
}

// wakeup is the disruption Deps.Wakeup over the disruption queue, or nil
// (passes on the schedule only) when none is configured.
func (a *App) wakeup() func(ctx context.Context, msg queue.Message, delay time.Duration) error {
	if a.Wakeups == nil {
		a.Log.Warn("no disruption queue configured: consolidateAfter and validation delays end on the schedule's ticks")
		return nil
	}
	return a.Wakeups.Send
}

// catalog is the Deps.Catalog the provisioner plans with (and disruption
// simulates with): EC2's instance types priced from the shared price cache,
// with the capacity reservations the EC2NodeClasses select and the
// controller's allocatable settings.
func (a *App) catalog() func(context.Context) (*catalog.Catalog, error) {
	next := provisioning.ForNodeClasses(provisioning.ProviderCatalog(a.EC2, awsstore.Prices{Store: a.Store}, a.AWSConfig.Region, a.Log), a.EC2, a.Config)
	sc := a.Settings.Scheduling
	ctl := catalog.ControllerAllocatable{VMMemoryOverheadPercent: sc.VMMemoryOverheadPercent, ReservedENIs: sc.ReservedENIs}
	return func(ctx context.Context) (*catalog.Catalog, error) {
		cat, err := next(ctx)
		if err != nil {
			return nil, err
		}
		return cat.WithControllerAllocatable(ctl), nil
	}
}

// policy is the planning policy of the settings (Karpenter's
// MIN_VALUES_POLICY and PREFERENCE_POLICY).
func (a *App) policy() scheduling.Policy {
	s := a.Settings.Scheduling
	return scheduling.Policy{
		MinValuesBestEffort: s.MinValuesPolicy == settings.MinValuesBestEffort,
		IgnorePreferences:   s.PreferencePolicy == settings.PreferencesIgnore,
	}
}

// replacementPass is a provisioning pass over the provisioner function's
// adapters, for a controller that launches replacements through the one
// launch path (function names it in errors); tune, when set, adjusts the
// pass's settings first.
func (a *App) replacementPass(function string, tune func(*provisioning.Settings)) (provisioning.Pass, error) {
	pd, err := a.ProvisionerDeps()
	if err != nil {
		return nil, err
	}
	if tune != nil {
		tune(&pd.Settings)
	}
	prov, err := provisioning.New(pd)
	if err != nil {
		return nil, fmt.Errorf("%s: provisioner: %w", function, err)
	}
	return prov.Pass(), nil
}

// holder identifies this execution environment in function's leases
// (Lambda's log stream names one).
func holder(function string) string {
	if s := os.Getenv("AWS_LAMBDA_LOG_STREAM_NAME"); s != "" {
		return function + "/" + s
	}
	h, _ := os.Hostname()
	return fmt.Sprintf("%s/%s/%d", function, h, os.Getpid())
}
