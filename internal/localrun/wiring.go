package localrun

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/settings"
)

// controllers are the functions the local run invokes in-process, fed by
// their queues and schedules (the webhook runs behind its function URL).
var controllers = []string{"provisioner", "lifecycle", "interruption", "disruption"}

// buildFunctions builds the functions as functions/<name>/main.go builds
// them, through internal/app, each with the stack's settings for it. The
// first environment of each is initialized now, so a configuration error
// fails Start; later ones start as Lambda starts them (cold starts).
func (s *System) buildFunctions(ctx context.Context, st *deployed) (map[string]*lambdaFunction, error) {
	fns := map[string]*lambdaFunction{}
	for _, name := range controllers {
		spec, err := st.spec.Function(name)
		if err != nil {
			return nil, err
		}
		a, h, err := s.newEnvironment(ctx, st, name)
		if err != nil {
			return nil, err
		}
		switch name {
		case "provisioner":
			s.Provisioner = a
		case "lifecycle":
			s.Lifecycle = a
		}
		timeout := spec.Timeout
		if d, ok := s.o.Lambda.Timeouts[name]; ok && d > 0 {
			timeout = d
		}
		fns[name] = &lambdaFunction{name: name, spec: spec, timeout: timeout, faults: s.faults, report: s.reportFailure, bg: &s.wg,
			idle: []handlerFunc{h},
			newEnv: func(ctx context.Context) (handlerFunc, error) {
				_, h, err := s.newEnvironment(ctx, st, name)
				return h, err
			}}
	}
	s.printf("functions built through internal/app: provisioner, lifecycle, disruption and interruption reach EKS cluster %s via DescribeCluster + STS token", s.Settings.ClusterName)
	return fns, nil
}

// newEnvironment is one execution environment's init: the function's app
// and its handler as Run hands it to Lambda.
func (s *System) newEnvironment(ctx context.Context, st *deployed, fn string) (*app.App, handlerFunc, error) {
	tap := &logTap{fn: fn, tl: s.tl, raw: s.o.Logs}
	a, err := app.New(ctx, s.Settings, app.Options{Function: fn, Out: tap, AWSCredentials: st.stack.Controller})
	if err != nil {
		return nil, nil, fmt.Errorf("build the %s function: %w", fn, err)
	}
	h, err := s.handlerOf(a, fn)
	if err != nil {
		return nil, nil, fmt.Errorf("build the %s function: %w", fn, err)
	}
	return a, handlerFunc(a.Wrap(h)), nil
}

// handlerOf is fn's handler; the provisioner's with a shorter
// registration follow-up when asked.
func (s *System) handlerOf(a *app.App, fn string) (app.Handler, error) {
	if fn != "provisioner" || s.o.RegistrationCheck <= 0 {
		return a.FunctionHandler(fn)
	}
	pd, err := a.ProvisionerDeps()
	if err != nil {
		return nil, err
	}
	pd.Settings.RegistrationCheck = s.o.RegistrationCheck
	ph, err := provisioning.NewHandler(pd)
	if err != nil {
		return nil, err
	}
	return ph.Handle, nil
}

// reportFailure records a failed invocation.
func (s *System) reportFailure(fn, trigger string, err error, took time.Duration) {
	s.faults.failure(fn, err)
	s.errorf(fmt.Errorf("%s (%s) failed after %s: %w", fn, trigger, took.Round(time.Millisecond), err))
}

// startWebhookFunction runs the webhook function behind its function URL
// and registers it with the API server.
func (s *System) startWebhookFunction(ctx context.Context, st *deployed) error {
	set := s.Settings
	webhookLog := settings.Logger(&logTap{fn: "webhook", tl: s.tl, raw: s.o.Logs}, set.LogLevel, "webhook")
	wh, err := admission.NewHandler(admission.Options{Secret: set.WebhookSecret, Coalesce: set.BatchIdle, Logger: webhookLog,
		Nudger: admission.ProvisionNudger{Queue: queue.New(sqs.NewFromConfig(st.webhookCfg), set.ProvisionQueueURL)}})
	if err != nil {
		return err
	}
	spec, err := st.spec.Function("webhook")
	if err != nil {
		return err
	}
	s.webhook, err = startWebhook(throttled(wh, spec.ReservedConcurrency, s.faults), set.WebhookSecret, nil)
	if err != nil {
		return err
	}
	s.closers = append(s.closers, func() { _ = s.webhook.Close() })
	kc := s.cloud.KubeClient
	if err := registerWebhook(ctx, kc, s.o.Name, s.webhook.url, s.webhook.caPEM); err != nil {
		return err
	}
	s.closers = append(s.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(cctx, s.o.Name, metav1.DeleteOptions{})
	})
	s.printf("ValidatingWebhookConfiguration %s registered: pods/status UPDATE where Unschedulable -> https://%s/admit/<secret> (failurePolicy Ignore, timeout 2s)",
		s.o.Name, s.webhook.ln.Addr())
	return nil
}

// startEventSources feeds the functions their queues and schedules, as
// the stack wires them, until cleanup (or ctx ends).
func (s *System) startEventSources(ctx context.Context, st *deployed, fns map[string]*lambdaFunction) error {
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-runCtx.Done():
		}
	}()
	region := s.cloud.Region
	var scheduled []string
	for _, name := range controllers {
		f := fns[name]
		for _, src := range f.spec.Sources {
			url, arn, err := s.Queues.byConstruct(src.Queue.Construct)
			if err != nil {
				return fmt.Errorf("%s event source: %w", name, err)
			}
			es := &eventSource{fn: f, spec: src, client: st.sqsClient, url: url, arn: arn, region: region, onErr: s.errorf, wg: &s.wg}
			es.start(runCtx)
			s.sources = append(s.sources, es)
		}
		for _, expr := range f.spec.Schedules {
			period, err := schedulePeriod(expr, s.o.Tick)
			if err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			schedule(runCtx, &s.wg, period, region, awssim.DefaultAccountID, f)
			scheduled = append(scheduled, fmt.Sprintf("%s (%s)", name, period))
		}
	}
	s.printf("event sources: provision queue -> provisioner, work queue -> lifecycle, interruption queue -> interruption, disruption queue -> disruption (its wake-ups), schedules -> %s", strings.Join(scheduled, " + "))
	s.printf("Lambda as the stack configures it: %s", describe(fns))
	s.printf("faults at random (seed %d): %s", s.faults.o.Seed, s.faults.o.Rates())
	return nil
}
