package localrun

import (
	"context"
	"fmt"
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

// handlers are the four controller functions' Lambda handlers.
type handlers struct {
	provisioner, lifecycle, disruption, interruption handlerFunc
}

// buildFunctions builds the functions as functions/<name>/main.go builds
// them, through internal/app.
func (s *System) buildFunctions(ctx context.Context, st *deployed) (handlers, error) {
	mkApp := func(fn string) (*app.App, error) {
		tap := &logTap{fn: fn, tl: s.tl, raw: s.o.Logs}
		a, err := app.New(ctx, s.Settings, app.Options{Function: fn, Out: tap, AWSCredentials: st.stack.Controller})
		if err != nil {
			return nil, fmt.Errorf("build the %s function: %w", fn, err)
		}
		return a, nil
	}
	var err error
	if s.Provisioner, err = mkApp("provisioner"); err != nil {
		return handlers{}, err
	}
	if s.Lifecycle, err = mkApp("lifecycle"); err != nil {
		return handlers{}, err
	}
	disr, err := mkApp("disruption")
	if err != nil {
		return handlers{}, err
	}
	intr, err := mkApp("interruption")
	if err != nil {
		return handlers{}, err
	}
	// The provisioner's handler as ProvisionerHandler builds it, with a
	// shorter registration follow-up when asked.
	pd, err := s.Provisioner.ProvisionerDeps()
	if err != nil {
		return handlers{}, err
	}
	if s.o.RegistrationCheck > 0 {
		pd.Settings.RegistrationCheck = s.o.RegistrationCheck
	}
	ph, err := provisioning.NewHandler(pd)
	if err != nil {
		return handlers{}, err
	}
	lh, err := s.Lifecycle.LifecycleHandler()
	if err != nil {
		return handlers{}, err
	}
	dh, err := disr.DisruptionHandler()
	if err != nil {
		return handlers{}, err
	}
	ih, err := intr.InterruptionHandler()
	if err != nil {
		return handlers{}, err
	}
	s.printf("functions built through internal/app: provisioner, lifecycle, disruption and interruption reach EKS cluster %s via DescribeCluster + STS token", s.Settings.ClusterName)
	return handlers{provisioner: ph.Handle, lifecycle: lh.Handle, disruption: dh.Handle, interruption: ih.Handle}, nil
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
	s.webhook, err = startWebhook(wh, set.WebhookSecret, nil)
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

// startEventSources feeds the functions their queues and schedule until
// cleanup (or ctx ends).
func (s *System) startEventSources(ctx context.Context, st *deployed, h handlers) {
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-runCtx.Done():
		}
	}()
	onErr := s.errorf
	report := func(fn, trigger string, res any, err error, took time.Duration) {
		if err != nil {
			onErr(fmt.Errorf("%s (%s) failed after %s: %w", fn, trigger, took.Round(time.Millisecond), err))
		}
	}
	provFn := &function{name: "provisioner", handle: h.provisioner, timeout: 300 * time.Second, singleton: true, onResult: report}
	lifeFn := &function{name: "lifecycle", handle: h.lifecycle, timeout: 120 * time.Second, onResult: report}
	disrFn := &function{name: "disruption", handle: h.disruption, timeout: 300 * time.Second, singleton: true, onResult: report}
	intrFn := &function{name: "interruption", handle: h.interruption, timeout: 40 * time.Second, onResult: report}
	qs, region := s.Queues, s.cloud.Region
	pollQueue(runCtx, &s.wg, st.sqsClient, region, qs.ProvisionURL, qs.ProvisionARN, provFn, onErr)
	pollQueue(runCtx, &s.wg, st.sqsClient, region, qs.WorkURL, qs.WorkARN, lifeFn, onErr)
	pollQueue(runCtx, &s.wg, st.sqsClient, region, qs.InterruptionURL, qs.InterruptionARN, intrFn, onErr)
	pollQueue(runCtx, &s.wg, st.sqsClient, region, qs.DisruptionURL, qs.DisruptionARN, disrFn, onErr)
	schedule(runCtx, &s.wg, s.o.Tick, region, awssim.DefaultAccountID, provFn, lifeFn, disrFn)
	s.printf("event sources: provision queue -> provisioner, work queue -> lifecycle, interruption queue -> interruption, disruption queue -> disruption (its wake-ups), schedule every %s -> provisioner + lifecycle + disruption", s.o.Tick)
}
