package app

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
)

// Environment variables tuning the disruption function (optional).
const (
	EnvDisruptionValidationDelay  = "NODEWRIGHT_DISRUPTION_VALIDATION_DELAY"
	EnvDisruptionRepackPercent    = "NODEWRIGHT_DISRUPTION_REPACK_MIN_SAVINGS_PERCENT"
	EnvDisruptionRepackDollars    = "NODEWRIGHT_DISRUPTION_REPACK_MIN_SAVINGS_PER_HOUR"
	EnvDisruptionRepackDisabled   = "NODEWRIGHT_DISRUPTION_REPACK_DISABLED"
	EnvDisruptionReplacementLimit = "NODEWRIGHT_DISRUPTION_REPLACEMENT_TIMEOUT"
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
	s, err := disruptionSettings(os.Getenv)
	if err != nil {
		return disruption.Deps{}, err
	}
	d := disruption.Deps{
		Store:       a.Store,
		Cluster:     a.Kube,
		Cloud:       a.EC2,
		Catalog:     provisioning.ProviderCatalog(a.EC2, awsstore.Prices{Store: a.Store}, a.AWSConfig.Region, a.Log),
		Unavailable: provisioning.ProviderICE(a.EC2),
		Provision:   DisruptionProvisionPass(prov),
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

// DisruptionProvisionPass adapts a provisioner to the disruption
// controller's replacement pass.
func DisruptionProvisionPass(p *provisioning.Provisioner) disruption.Provision {
	return func(ctx context.Context) (disruption.ProvisionResult, error) {
		res, err := p.Run(ctx, provisioning.Trigger{Source: provisioning.TriggerManual})
		if res == nil {
			return disruption.ProvisionResult{}, err
		}
		return disruption.ProvisionResult{Skipped: res.Skipped, Launched: res.Launched, Failed: len(res.Failed)}, err
	}
}

func disruptionSettings(getenv func(string) string) (disruption.Settings, error) {
	var s disruption.Settings
	dur := func(name string, dst *time.Duration) error {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("%s=%q: want a non-negative duration such as 15s", name, v)
			}
			*dst = d
			if d == 0 {
				*dst = -1 // explicit zero: validate at once
			}
		}
		return nil
	}
	num := func(name string, dst *float64) error {
		if v := getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f < 0 {
				return fmt.Errorf("%s=%q: want a non-negative number", name, v)
			}
			*dst = f
		}
		return nil
	}
	if err := dur(EnvDisruptionValidationDelay, &s.ValidationDelay); err != nil {
		return s, err
	}
	if err := dur(EnvDisruptionReplacementLimit, &s.ReplacementTimeout); err != nil {
		return s, err
	}
	if err := num(EnvDisruptionRepackPercent, &s.RepackMinSavingsFraction); err != nil {
		return s, err
	}
	s.RepackMinSavingsFraction /= 100
	if err := num(EnvDisruptionRepackDollars, &s.RepackMinSavings); err != nil {
		return s, err
	}
	if v := getenv(EnvDisruptionRepackDisabled); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return s, fmt.Errorf("%s=%q: want true or false", EnvDisruptionRepackDisabled, v)
		}
		s.DisableRepack = b
	}
	return s, nil
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
