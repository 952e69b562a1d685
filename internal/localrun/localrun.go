// Package localrun runs nodewright on the local cloud the way AWS runs it:
// it creates what the CDK stack would (table, queues with dead-letter
// queues, the interruption rules, the functions' roles and environment),
// builds the five functions through internal/app exactly as
// functions/<name>/main.go builds them, and feeds them the events AWS would
// deliver:
//
//   - the admission webhook: the local kube-apiserver calls it through a real
//     ValidatingWebhookConfiguration (pods/status UPDATE, match conditions for
//     Unschedulable, failurePolicy Ignore, timeoutSeconds 2) at an HTTPS
//     endpoint with a CA generated for the run; it nudges the provisioner
//     through the provision queue;
//   - the provisioner, lifecycle, interruption and disruption functions:
//     invoked with SQS batches polled from their queues (as Lambda's event
//     source mappings do) and, for those the stack schedules, EventBridge
//     "Scheduled Event"s every tick, asynchronously.
//
// Lambda's, SQS's and EventBridge's own semantics apply, with the stack's
// settings read from its synthesized template (internal/localcloud/
// lambdaspec): reserved concurrency and throttling, asynchronous retries
// and event age, event source scaling and MaximumConcurrency, timeouts,
// cold starts, at-least-once delivery and delayed events (lambda.go,
// async.go, eventsource.go, atleastonce.go, eventdelay.go; faults.go for
// the random ones and their counts).
//
// The functions reach the cluster the way they do in AWS: EKS
// DescribeCluster and an STS-presigned token that the API server checks with
// the simulator's token webhook. `make demo` (internal/demo) and
// `nodewright local up --config` both run the system through this package.
package localrun

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/ebscsi"
	"github.com/nodewright/nodewright/internal/settings"
)

// Options configure Start.
type Options struct {
	// ConfigDir holds the NodePools and EC2NodeClasses the functions load
	// (their NODEWRIGHT_CONFIG_DIR, as the CDK app bundles it). Required.
	ConfigDir string
	// NodeRole is the role the EC2NodeClasses pass to their instances
	// (default KarpenterNodeRole-<cluster>).
	NodeRole string
	// Volumes runs the simulated EBS CSI driver (internal/localcloud/ebscsi)
	// so claims provision as on EKS.
	Volumes bool
	// Name prefixes the table, the queues and the webhook configuration
	// (default "nodewright-local").
	Name string
	// Tick is the period of the functions' schedule (default 5s; one
	// minute in AWS).
	Tick time.Duration
	// RegistrationCheck, when set, replaces the delay of the provisioner's
	// lifecycle follow-up after a launch (the function's own default is
	// 30 s; the simulated kubelet registers within seconds).
	RegistrationCheck time.Duration
	// Timeline receives the human timeline rendered from the functions'
	// logs; nil prints nothing.
	Timeline *Timeline
	// Logs receives the functions' JSON logs and EMF metrics (default
	// discard).
	Logs io.Writer
	// Lambda sets the random faults of Lambda, SQS and EventBridge
	// (default: on at modest rates; NoFaults turns them off).
	Lambda LambdaOptions
}

// System is nodewright running on a local cloud.
type System struct {
	// Provisioner and Lifecycle are the functions' apps (their Store reads
	// the table).
	Provisioner, Lifecycle *app.App
	// Table is the functions' DynamoDB table.
	Table string
	// Queues are the stack's queues.
	Queues Queues
	// Settings are the functions' settings.
	Settings settings.Settings

	o       Options
	cloud   *localcloud.Cloud
	tl      *Timeline
	webhook *webhookServer
	errs    errorLog
	faults  *faults
	sources []*eventSource

	stop    context.CancelFunc
	wg      sync.WaitGroup
	closers []func()
}

// Start deploys the stack into cloud and runs every function until Close
// (or ctx ends). It changes this process's environment (the functions'
// AWS SDK configuration reads it, as in Lambda) until Close, so one System
// runs per process. On error everything already started is stopped.
func Start(ctx context.Context, cloud *localcloud.Cloud, o Options) (_ *System, err error) {
	if o.ConfigDir == "" {
		return nil, errors.New("localrun: no configuration directory")
	}
	if o.Name == "" {
		o.Name = "nodewright-local"
	}
	basedeps.Default(&o.Tick, 5*time.Second)
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	s := &System{o: o, cloud: cloud, tl: o.Timeline, faults: newFaults(o.Lambda, o.Tick)}
	s.o.Lambda = s.faults.o
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	st, err := s.deployStack(ctx)
	if err != nil {
		return nil, err
	}
	fns, err := s.buildFunctions(ctx, st)
	if err != nil {
		return nil, err
	}
	if err := s.startWebhookFunction(ctx, st); err != nil {
		return nil, err
	}
	if err := s.startEventSources(ctx, st, fns); err != nil {
		return nil, err
	}
	if o.Volumes {
		if err := s.startVolumes(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// startVolumes installs the simulated EBS CSI driver and runs its
// provisioner until Close.
func (s *System) startVolumes(ctx context.Context) error {
	if err := ebscsi.Install(ctx, s.cloud.KubeClient); err != nil {
		return err
	}
	vctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	logger := settings.Logger(&logTap{fn: "ebs-csi", tl: s.tl, raw: s.o.Logs}, s.Settings.LogLevel, "ebs-csi")
	go func() {
		defer close(done)
		ebscsi.Run(vctx, s.cloud.KubeClient, 500*time.Millisecond, logger)
	}()
	s.closers = append(s.closers, func() { cancel(); <-done })
	s.printf("EBS CSI driver (simulated): StorageClass %s (WaitForFirstConsumer, default), volumes in the zone of the pod's node, attachment limits per instance type", ebscsi.StorageClassName)
	return nil
}

// Close stops the event sources, waits for the invocations under way and
// removes what Start registered (the webhook configuration, the process
// environment). The table and queues stay in the local cloud, which goes
// with them.
func (s *System) Close() {
	if s.stop != nil {
		s.stop()
	}
	s.wg.Wait()
	for i := len(s.closers) - 1; i >= 0; i-- {
		s.closers[i]()
	}
	s.closers = nil
}

// Err joins the first distinct errors the functions and event sources
// reported (nil when none).
func (s *System) Err() error { return s.errs.err() }

// WebhookStats returns the number of AdmissionReviews the webhook served,
// when the first arrived and when the last one before t arrived.
func (s *System) WebhookStats(t time.Time) (n int, first, lastBefore time.Time) {
	return s.webhook.stats(t)
}

// LambdaStats counts the throttles, retries, timeouts, cold starts,
// duplicate deliveries and delayed events of the run so far.
func (s *System) LambdaStats() LambdaStats { return s.faults.stats() }

// LambdaOptions are the fault settings the run uses (defaults filled).
func (s *System) LambdaOptions() LambdaOptions { return s.faults.o }

// WebhookName is the ValidatingWebhookConfiguration the system registers.
func (s *System) WebhookName() string { return s.o.Name }

func (s *System) printf(format string, args ...any) { s.tl.Printf(format, args...) }

// errorf records an error of the functions or event sources, printing it
// on the timeline the first time.
func (s *System) errorf(err error) {
	if s.errs.add(err) {
		s.printf("ERROR %v", err)
	}
}
