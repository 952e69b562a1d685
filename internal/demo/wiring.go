package demo

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
func (d *run) buildFunctions(ctx context.Context, st *deployed) (handlers, error) {
	mkApp := func(fn string) (*app.App, error) {
		tap := &logTap{fn: fn, tl: d.tl, raw: d.o.Logs}
		a, err := app.New(ctx, st.settings, app.Options{Function: fn, Out: tap, AWSCredentials: st.stack.Controller})
		if err != nil {
			return nil, fmt.Errorf("build the %s function: %w", fn, err)
		}
		return a, nil
	}
	var err error
	if d.prov, err = mkApp("provisioner"); err != nil {
		return handlers{}, err
	}
	if d.life, err = mkApp("lifecycle"); err != nil {
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
	// The provisioner's handler as ProvisionerHandler builds it, with the
	// demo's shorter registration follow-up.
	pd, err := d.prov.ProvisionerDeps()
	if err != nil {
		return handlers{}, err
	}
	pd.Settings.RegistrationCheck = d.o.RegistrationCheck
	ph, err := provisioning.NewHandler(pd)
	if err != nil {
		return handlers{}, err
	}
	lh, err := d.life.LifecycleHandler()
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
	d.tl.printf("functions built through internal/app: provisioner, lifecycle, disruption and interruption reach EKS cluster %s via DescribeCluster + STS token", st.settings.ClusterName)
	return handlers{provisioner: ph.Handle, lifecycle: lh.Handle, disruption: dh.Handle, interruption: ih.Handle}, nil
}

// startWebhookFunction runs the webhook function behind its function URL
// and registers it with the API server.
func (d *run) startWebhookFunction(ctx context.Context, st *deployed) error {
	s := st.settings
	webhookLog := settings.Logger(&logTap{fn: "webhook", tl: d.tl, raw: d.o.Logs}, s.LogLevel, "webhook")
	wh, err := admission.NewHandler(admission.Options{Secret: s.WebhookSecret, Coalesce: s.BatchIdle, Logger: webhookLog,
		Nudger: queueNudger{ProvisionNudger: admission.ProvisionNudger{Queue: queue.New(sqs.NewFromConfig(st.webhookCfg), s.ProvisionQueueURL)}}})
	if err != nil {
		return err
	}
	d.webhook, err = startWebhook(wh, s.WebhookSecret, nil)
	if err != nil {
		return err
	}
	d.closers = append(d.closers, func() { _ = d.webhook.Close() })
	if err := registerWebhook(ctx, d.kc, d.webhook.url, d.webhook.caPEM); err != nil {
		return err
	}
	d.closers = append(d.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = d.kc.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(cctx, webhookName, metav1.DeleteOptions{})
	})
	d.tl.printf("ValidatingWebhookConfiguration %s registered: pods/status UPDATE where Unschedulable -> https://%s/admit/<secret> (failurePolicy Ignore, timeout 2s)",
		webhookName, d.webhook.ln.Addr())
	return nil
}

// startEventSources feeds the functions their queues and schedule until
// cleanup (or ctx ends).
func (d *run) startEventSources(ctx context.Context, st *deployed, h handlers) {
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	d.stop = stop
	go func() {
		select {
		case <-ctx.Done():
			stop()
		case <-runCtx.Done():
		}
	}()
	onErr := func(err error) {
		if d.errs.add(err) {
			d.tl.printf("ERROR %v", err)
		}
	}
	report := func(fn, trigger string, res any, err error, took time.Duration) {
		if err != nil {
			onErr(fmt.Errorf("%s (%s) failed after %s: %w", fn, trigger, took.Round(time.Millisecond), err))
		}
	}
	provFn := &function{name: "provisioner", handle: h.provisioner, timeout: 300 * time.Second, singleton: true, onResult: report}
	lifeFn := &function{name: "lifecycle", handle: h.lifecycle, timeout: 120 * time.Second, onResult: report}
	disrFn := &function{name: "disruption", handle: h.disruption, timeout: 300 * time.Second, singleton: true, onResult: report}
	intrFn := &function{name: "interruption", handle: h.interruption, timeout: 40 * time.Second, onResult: report}
	qs := st.qs
	pollQueue(runCtx, &d.wg, st.sqsClient, qs.ProvisionURL, qs.ProvisionARN, provFn, onErr)
	pollQueue(runCtx, &d.wg, st.sqsClient, qs.WorkURL, qs.WorkARN, lifeFn, onErr)
	pollQueue(runCtx, &d.wg, st.sqsClient, qs.InterruptionURL, qs.InterruptionARN, intrFn, onErr)
	pollQueue(runCtx, &d.wg, st.sqsClient, qs.DisruptionURL, qs.DisruptionARN, disrFn, onErr)
	schedule(runCtx, &d.wg, d.o.Tick, Region, awssim.DefaultAccountID, provFn, lifeFn, disrFn)
	d.tl.printf("event sources: provision queue -> provisioner, work queue -> lifecycle, interruption queue -> interruption, disruption queue -> disruption (its wake-ups), schedule every %s -> provisioner + lifecycle + disruption", d.o.Tick)
}
