// Package demo is `nodewright demo` (`make demo`): on the local cloud it
// runs nodewright's real function handlers, built through internal/app
// exactly as the Lambda functions are and fed the events AWS would deliver,
// while a Deployment scales from 0 to N pods and back.
//
//   - the admission webhook: the local kube-apiserver calls it through a real
//     ValidatingWebhookConfiguration (pods/status UPDATE, match conditions for
//     Unschedulable, failurePolicy Ignore, timeoutSeconds 2) at an HTTPS
//     endpoint with a CA generated for the run; it nudges the provisioner
//     through the provision queue;
//   - the provisioner: invoked with SQS batches polled from the provision
//     queue and with EventBridge "Scheduled Event"s (the backstop);
//   - the lifecycle: invoked with SQS batches from the work queue (the
//     provisioner's and its own delayed requeues) and schedule ticks; it
//     registers and initializes the nodes and, for the WhenEmpty pool,
//     deletes empty nodes after consolidateAfter and drains and terminates
//     them.
//
// The functions reach the cluster the way they do in AWS: EKS
// DescribeCluster and an STS-presigned token that the API server checks with
// the simulator's token webhook. The timeline printed is rendered from the
// functions' own logs and from what the cluster and the cloud show.
package demo

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

//go:embed testdata/default.yaml testdata/inflate.yaml
var testdata embed.FS

// Region and ClusterName of the demo's local cloud: the seed NodePool's
// zones are us-east-1a..c.
const (
	Region      = "us-east-1"
	ClusterName = "nodewright-demo"
	// ConsolidateAfter is the demo pool's consolidateAfter
	// (testdata/default.yaml).
	ConsolidateAfter = 5 * time.Second
)

// CloudOptions are the local cloud options the demo needs (for callers
// that start the cloud themselves, like tests sharing one).
func CloudOptions(logger *slog.Logger) localcloud.Options {
	return localcloud.Options{Region: Region, ClusterName: ClusterName, Logger: logger}
}

// Options configure a demo run.
type Options struct {
	// Replicas is how far the inflate Deployment scales (default 10).
	Replicas int
	// Out receives the timeline and the final line.
	Out io.Writer
	// Logs receives the functions' JSON logs and EMF metrics (default
	// discard).
	Logs io.Writer
	// Tick is the period of the functions' schedule (default 5s; one
	// minute in AWS).
	Tick time.Duration
	// RegistrationCheck is the delay of the provisioner's lifecycle
	// follow-up after a launch (default 3s; the function's own default is
	// 30 s). The simulated kubelet registers within seconds, so a shorter
	// follow-up lets time_to_running measure nodewright rather than the
	// wait for the next follow-up or schedule tick.
	RegistrationCheck time.Duration
	// Timeout bounds each phase: scale-up to all Running, scale-down to no
	// nodes (default 5 minutes).
	Timeout time.Duration
	// Namespace of the inflate Deployment (default "default").
	Namespace string
	// ConsolidationPolicy of the demo pool: WhenEmpty (default; emptiness
	// in the lifecycle and disruption functions) or WhenEmptyOrUnderutilized
	// (the seed's; the disruption function's consolidation).
	ConsolidationPolicy string
	// Burst creates the pods all at once from the inflate pod template
	// (no controller; deleted together for the scale-down) instead of
	// scaling the Deployment. The local control plane's ReplicaSet
	// controller creates pods at kube-controller-manager's default 20 QPS,
	// which spreads 100 replicas over 5 s and so measures the controller's
	// pace rather than nodewright's batching; a burst measures the latter.
	Burst bool
	// Cloud, when set, is used instead of starting (and stopping) one; it
	// must have been started with CloudOptions.
	Cloud *localcloud.Cloud
	// Progress receives the local cloud's start-up messages.
	Progress *slog.Logger
}

// Result is what a demo run measured.
type Result struct {
	Pods, Running, Nodes int
	// CostPerHour is the price of the instances running when every pod
	// was Running, at the cloud's prices.
	CostPerHour float64
	// TimeToRunning is from the scale-up to every pod Running.
	TimeToRunning time.Duration
	// ScaleDown is from the scale to 0 to every instance terminated and
	// every node and NodeClaim gone.
	ScaleDown time.Duration
	// WebhookCalls counts the API server's AdmissionReviews.
	WebhookCalls int
	// WebhookToFleet is from the first Unschedulable AdmissionReview to the
	// first CreateFleet request.
	WebhookToFleet time.Duration
	// CreateSpread is how long creating the pods took (Burst only): the
	// provisioner's batch closes an idle window after the last one.
	CreateSpread time.Duration
	// LastVerdictToFleet is from the last Unschedulable AdmissionReview
	// before the first CreateFleet to that CreateFleet: nodewright's own
	// share (the batch's idle window, snapshot, solve, launch) once the
	// scheduler has judged every pod.
	LastVerdictToFleet time.Duration
	// NodeClaims is how many NodeClaims the scale-up created.
	NodeClaims int
	// IAM is "enforced" when every AWS call was evaluated under the
	// synthesized stack's policy for the calling function's role, "off"
	// otherwise; IAMDenied counts the calls it refused.
	IAM       string
	IAMDenied int
	// InstanceTypes launched, e.g. {"c6g.4xlarge": 1}.
	InstanceTypes map[string]int
}

// Line is the demo's last line.
func (r Result) Line() string {
	return fmt.Sprintf("DEMO OK pods=%d running=%d nodes=%d cost_per_hour=%.4f time_to_running_s=%.1f scale_down_s=%.1f iam=%s denied=%d",
		r.Pods, r.Running, r.Nodes, r.CostPerHour, r.TimeToRunning.Seconds(), r.ScaleDown.Seconds(), r.IAM, r.IAMDenied)
}

// Run runs the demo. It stops everything it started before returning, also
// when ctx is cancelled (Ctrl-C).
func Run(ctx context.Context, o Options) (res Result, err error) {
	if o.Replicas <= 0 {
		o.Replicas = 10
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	if o.Tick <= 0 {
		o.Tick = 5 * time.Second
	}
	if o.RegistrationCheck <= 0 {
		o.RegistrationCheck = 3 * time.Second
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Minute
	}
	if o.Namespace == "" {
		o.Namespace = "default"
	}
	switch o.ConsolidationPolicy {
	case "":
		o.ConsolidationPolicy = string(apis.ConsolidationPolicyWhenEmpty)
	case string(apis.ConsolidationPolicyWhenEmpty), string(apis.ConsolidationPolicyWhenEmptyOrUnderutilized):
	default:
		return res, fmt.Errorf("consolidation policy %q: want %s or %s", o.ConsolidationPolicy,
			apis.ConsolidationPolicyWhenEmpty, apis.ConsolidationPolicyWhenEmptyOrUnderutilized)
	}
	tl := &timeline{out: o.Out, start: time.Now()}

	cloud := o.Cloud
	if cloud == nil {
		tl.printf("starting the local cloud (kube-apiserver + KWOK, dynalite, AWS simulator; the first run builds them)")
		cloud, err = localcloud.Start(ctx, CloudOptions(o.Progress))
		if err != nil {
			return res, fmt.Errorf("start the local cloud: %w", err)
		}
		defer cloud.Close()
		tl.printf("local cloud ready in %s (EKS cluster %s in %s)", cloud.StartupTimes["total"].Round(time.Millisecond), cloud.ClusterName, cloud.Region)
	}
	if cloud.Region != Region || cloud.ClusterName != ClusterName {
		return res, fmt.Errorf("the local cloud is %s in %s; the demo needs %s in %s (CloudOptions)", cloud.ClusterName, cloud.Region, ClusterName, Region)
	}

	d := &run{o: o, tl: tl, cloud: cloud, kc: cloud.KubeClient}
	defer d.cleanup()
	if err := d.setup(ctx); err != nil {
		return res, err
	}
	return d.scenario(ctx)
}

// run is one demo run's state.
type run struct {
	o     Options
	tl    *timeline
	cloud *localcloud.Cloud
	kc    kubernetes.Interface

	prov, life *app.App
	webhook    *webhookServer
	errs       errorLog

	stop    context.CancelFunc
	wg      sync.WaitGroup
	closers []func()
}

func (d *run) cleanup() {
	if d.stop != nil {
		d.stop()
	}
	d.wg.Wait()
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// setup creates what the CDK stack would (table, queues, rules, the
// functions' configuration), builds the functions and starts feeding them
// events.
func (d *run) setup(ctx context.Context) error {
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	table := "nodewright-demo-" + suffix
	configDir, err := os.MkdirTemp("", "nodewright-demo-config-")
	if err != nil {
		return err
	}
	d.closers = append(d.closers, func() { _ = os.RemoveAll(configDir) })
	if err := writeConfig(configDir, d.cloud.ClusterName, d.o.ConsolidationPolicy); err != nil {
		return fmt.Errorf("write the demo NodePool/EC2NodeClass: %w", err)
	}

	// The functions' environment is applied to this process: the AWS SDK's
	// default configuration reads it, as in Lambda.
	// The queues' URLs are added once they exist.
	base := functionEnv(d.cloud, table, queueSet{}, configDir, "", time.Second)
	d.closers = append(d.closers, setEnv(base))
	awsCfg, err := settings.AWSConfig(ctx)
	if err != nil {
		return fmt.Errorf("AWS configuration: %w", err)
	}
	if err := createTable(ctx, store.NewDynamoDBClient(awsCfg), table); err != nil {
		return err
	}
	sqsClient := sqs.NewFromConfig(awsCfg)
	qs, err := createQueues(ctx, sqsClient, "nodewright-demo-"+suffix)
	if err != nil {
		return err
	}
	if err := createRules(d.cloud, qs.InterruptionARN); err != nil {
		return err
	}
	// Each function signs its AWS calls as its role of the stack, under the
	// IAM policy `cdk synth` produced for it (when the cloud enforces IAM).
	stack, err := d.cloud.Deploy(localcloud.StackResources{Table: table, ProvisionQueue: qs.ProvisionURL, WorkQueue: qs.WorkURL, InterruptionQueue: qs.InterruptionURL})
	if err != nil {
		return err
	}
	ctrlCfg, webhookCfg := awsCfg.Copy(), awsCfg.Copy()
	ctrlCfg.Credentials, webhookCfg.Credentials = sdkaws.NewCredentialsCache(stack.Controller), sdkaws.NewCredentialsCache(stack.Webhook)
	// Lambda's event source mappings poll with the function's role.
	sqsClient = sqs.NewFromConfig(ctrlCfg)
	secret := randomSecret()
	batchIdle := time.Second
	env := functionEnv(d.cloud, table, qs, configDir, secret, batchIdle)
	d.closers = append(d.closers, setEnv(env))
	s, err := settings.FromEnv(os.Getenv)
	if err != nil {
		return fmt.Errorf("function settings: %w", err)
	}
	d.tl.printf("stack resources: DynamoDB table %s, SQS queues provision/work/interruption (+DLQs), 4 EventBridge rules -> interruption queue", table)

	cfg, err := apis.Load(configDir)
	if err != nil {
		return fmt.Errorf("load the demo configuration: %w", err)
	}
	np := cfg.NodePool("default")
	if np == nil {
		return errors.New("the demo configuration has no NodePool default")
	}
	after, _ := np.Spec.Disruption.ConsolidateAfter.Get()
	d.tl.printf("NodePool default (%s, consolidateAfter %s) and EC2NodeClass default (al2023@latest) loaded from the seeds",
		np.Spec.Disruption.ConsolidationPolicy, after)

	// The functions, built as functions/<name>/main.go builds them.
	var obsMu sync.Mutex
	var firstPlanned time.Time
	mkApp := func(fn string) (*app.App, error) {
		tap := &logTap{fn: fn, tl: d.tl, raw: d.o.Logs, onRecord: func(rec map[string]any) {
			if str(rec, "msg") == "nodeclaim planned" {
				obsMu.Lock()
				if firstPlanned.IsZero() {
					firstPlanned = time.Now()
				}
				obsMu.Unlock()
			}
		}}
		a, err := app.New(ctx, s, app.Options{Function: fn, Out: tap, AWSCredentials: stack.Controller})
		if err != nil {
			return nil, fmt.Errorf("build the %s function: %w", fn, err)
		}
		return a, nil
	}
	if d.prov, err = mkApp("provisioner"); err != nil {
		return err
	}
	if d.life, err = mkApp("lifecycle"); err != nil {
		return err
	}
	disr, err := mkApp("disruption")
	if err != nil {
		return err
	}
	intr, err := mkApp("interruption")
	if err != nil {
		return err
	}
	// The provisioner's handler as ProvisionerHandler builds it, with the
	// demo's shorter registration follow-up.
	pd, err := d.prov.ProvisionerDeps()
	if err != nil {
		return err
	}
	pd.Settings.RegistrationCheck = d.o.RegistrationCheck
	ph, err := provisioning.NewHandler(pd)
	if err != nil {
		return err
	}
	lh, err := d.life.LifecycleHandler()
	if err != nil {
		return err
	}
	dh, err := disr.DisruptionHandler()
	if err != nil {
		return err
	}
	ih, err := intr.InterruptionHandler()
	if err != nil {
		return err
	}
	d.tl.printf("functions built through internal/app: provisioner, lifecycle, disruption and interruption reach EKS cluster %s via DescribeCluster + STS token", s.ClusterName)

	// The webhook function behind its function URL.
	webhookLog := settings.Logger(&logTap{fn: "webhook", tl: d.tl, raw: d.o.Logs}, s.LogLevel, "webhook")
	wh, err := admission.NewHandler(admission.Options{Secret: s.WebhookSecret, Coalesce: s.BatchIdle, Logger: webhookLog,
		Nudger: queueNudger{ProvisionNudger: admission.ProvisionNudger{Queue: queue.New(sqs.NewFromConfig(webhookCfg), s.ProvisionQueueURL)}}})
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

	// Event sources.
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
	provFn := &function{name: "provisioner", handle: ph.Handle, timeout: 300 * time.Second, singleton: true, onResult: report}
	lifeFn := &function{name: "lifecycle", handle: lh.Handle, timeout: 120 * time.Second, onResult: report}
	disrFn := &function{name: "disruption", handle: dh.Handle, timeout: 300 * time.Second, singleton: true, onResult: report}
	intrFn := &function{name: "interruption", handle: ih.Handle, timeout: 40 * time.Second, onResult: report}
	pollQueue(runCtx, &d.wg, sqsClient, qs.ProvisionURL, qs.ProvisionARN, Region, provFn, onErr)
	pollQueue(runCtx, &d.wg, sqsClient, qs.WorkURL, qs.WorkARN, Region, lifeFn, onErr)
	pollQueue(runCtx, &d.wg, sqsClient, qs.InterruptionURL, qs.InterruptionARN, Region, intrFn, onErr)
	schedule(runCtx, &d.wg, d.o.Tick, Region, awssim.DefaultAccountID, provFn, lifeFn, disrFn)
	d.tl.printf("event sources: provision queue -> provisioner, work queue -> lifecycle, interruption queue -> interruption, schedule every %s -> provisioner + lifecycle + disruption", d.o.Tick)
	return nil
}

// scenario scales the Deployment up and down and measures.
func (d *run) scenario(ctx context.Context) (Result, error) {
	res := Result{Pods: d.o.Replicas, InstanceTypes: map[string]int{}}
	ns := d.o.Namespace
	if err := d.cloud.Plane.WaitServiceAccount(ctx, ns); err != nil {
		return res, fmt.Errorf("namespace %s: %w", ns, err)
	}
	dep, err := inflateDeployment()
	if err != nil {
		return res, err
	}
	dep.Namespace = ns
	deps := d.kc.AppsV1().Deployments(ns)
	if _, err := deps.Create(ctx, dep, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return res, fmt.Errorf("create deployment %s/inflate: %w", ns, err)
	}
	d.closers = append(d.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = deps.Delete(cctx, "inflate", metav1.DeleteOptions{})
	})

	obs := newObserver(d, ns)
	obsCtx, obsStop := context.WithCancel(ctx)
	var obsWG sync.WaitGroup
	obsWG.Go(func() { obs.loop(obsCtx) })
	defer func() { obsStop(); obsWG.Wait() }()

	// Scale up.
	fleetBefore := len(d.cloud.AWS.Calls("ec2", "CreateFleet"))
	upStart := time.Now()
	if d.o.Burst {
		if err := createPods(ctx, d.kc, dep, d.o.Replicas); err != nil {
			return res, err
		}
		res.CreateSpread = time.Since(upStart)
		d.tl.printf("created %d inflate pods at once in %.2fs (pause image, 1 CPU / 1Gi each)", d.o.Replicas, res.CreateSpread.Seconds())
	} else {
		if err := scale(ctx, deps, dep.Name, int32(d.o.Replicas)); err != nil {
			return res, err
		}
		d.tl.printf("kubectl scale deployment/inflate --replicas=%d (pause image, 1 CPU / 1Gi each)", d.o.Replicas)
	}
	err = d.waitFor(ctx, "every pod Running", func() (bool, error) {
		c := obs.pods()
		return c.Running == d.o.Replicas && c.Total == d.o.Replicas, nil
	})
	if err != nil {
		return res, err
	}
	res.TimeToRunning = time.Since(upStart)
	res.Running = obs.pods().Running
	if fleets := d.cloud.AWS.Calls("ec2", "CreateFleet"); len(fleets) > fleetBefore {
		at := fleets[fleetBefore].Time
		var first, last time.Time
		res.WebhookCalls, first, last = d.webhook.stats(at)
		if res.WebhookCalls > 0 && !last.IsZero() {
			res.WebhookToFleet = at.Sub(first)
			res.LastVerdictToFleet = at.Sub(last)
		}
	}
	if res.WebhookCalls == 0 {
		d.tl.printf("WARNING the API server never called the webhook; the schedule provisioned")
	}
	live := obs.liveInstances()
	res.Nodes = len(live)
	for _, in := range live {
		res.CostPerHour += in.price
		res.InstanceTypes[in.typ]++
	}
	if claims, err := d.prov.Store.ListNodeClaims(ctx); err == nil {
		res.NodeClaims = len(claims)
	}
	d.tl.printf("all %d pods Running after %.1fs on %d nodes (%s), $%.4f/h; first webhook call -> CreateFleet %s (last Unschedulable verdict before it -> CreateFleet %s); %d AdmissionReviews",
		res.Running, res.TimeToRunning.Seconds(), res.Nodes, typesString(res.InstanceTypes), res.CostPerHour,
		res.WebhookToFleet.Round(time.Millisecond), res.LastVerdictToFleet.Round(time.Millisecond), res.WebhookCalls)

	// Scale down.
	downStart := time.Now()
	if d.o.Burst {
		err = d.kc.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "app=inflate"})
		if err != nil {
			return res, fmt.Errorf("delete the inflate pods: %w", err)
		}
		d.tl.printf("deleted the %d pods; %s", d.o.Replicas, d.scaleDownHow())
	} else {
		if err := scale(ctx, deps, dep.Name, 0); err != nil {
			return res, err
		}
		d.tl.printf("kubectl scale deployment/inflate --replicas=0; %s", d.scaleDownHow())
	}
	err = d.waitFor(ctx, "every node drained and terminated", func() (bool, error) {
		if c := obs.pods(); c.Total != 0 {
			return false, nil
		}
		if len(obs.liveInstances()) != 0 || obs.nodeCount() != 0 {
			return false, nil
		}
		claims, err := d.prov.Store.ListNodeClaims(ctx)
		if err != nil {
			return false, nil // transient; the deadline reports a lasting failure
		}
		return len(claims) == 0, nil
	})
	if err != nil {
		return res, err
	}
	res.ScaleDown = time.Since(downStart)
	d.tl.printf("scaled down in %.1fs: no pods, no nodes, no NodeClaims, every instance terminated", res.ScaleDown.Seconds())
	res.IAM, res.IAMDenied = "off", 0
	if d.cloud.IAMEnforced() {
		res.IAM, res.IAMDenied = "enforced", len(d.cloud.IAMDenials())
	}
	// A refused call makes a function fail too; the policy's reason is the
	// more useful error.
	if err := d.checkIAM(); err != nil {
		return res, err
	}
	if err := d.errs.err(); err != nil {
		return res, fmt.Errorf("the functions reported errors during the demo: %w", err)
	}
	return res, d.checkRights()
}

// checkIAM reports the calls the stack's IAM policy refused the functions,
// each with its decoded authorization message: any is a permission the
// deployed stack would lack in AWS.
func (d *run) checkIAM() error {
	if !d.cloud.IAMEnforced() {
		d.tl.printf("WARNING IAM is not enforced: the functions' AWS calls were not checked against the stack's policy")
		return nil
	}
	denied := d.cloud.IAMDenials()
	if len(denied) > 0 {
		reasons := make([]string, 0, len(denied))
		for _, den := range denied {
			reasons = append(reasons, den.String())
		}
		return fmt.Errorf("the stack's IAM policy refused the functions %d calls:\n%s", len(denied), strings.Join(reasons, "\n"))
	}
	used, total := 0, 0
	for _, u := range d.cloud.AWS.StatementUses() {
		total++
		if u.Allowed > 0 {
			used++
		}
	}
	d.tl.printf("every AWS call was evaluated under the synthesized stack's IAM policy for its function's role: none refused (%d of the roles' %d statements used)", used, total)
	return nil
}

// checkRights reports what the API server refused the functions: they run
// with the controllers' RBAC rights only (internal/access), as the stack
// gives them in EKS, so any refusal is a right the stack would lack.
func (d *run) checkRights() error {
	denied, err := d.cloud.Forbidden()
	if err != nil {
		return err
	}
	if len(denied) > 0 {
		return fmt.Errorf("the API server refused the functions %d kinds of request (RBAC): %s", len(denied), strings.Join(denied, "; "))
	}
	d.tl.printf("the functions ran as group %s with only its ClusterRole's rights: the API server refused them nothing", access.ControllerGroup)
	return nil
}

func (d *run) scaleDownHow() string {
	if d.o.ConsolidationPolicy == string(apis.ConsolidationPolicyWhenEmpty) {
		return fmt.Sprintf("the lifecycle (or disruption) function deletes each empty node after consolidateAfter %s", ConsolidateAfter)
	}
	return fmt.Sprintf("the disruption function consolidates empty nodes after consolidateAfter %s", ConsolidateAfter)
}

// waitFor polls cond until it holds, the phase times out or ctx ends.
func (d *run) waitFor(ctx context.Context, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(d.o.Timeout)
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			msg := fmt.Sprintf("timed out after %s waiting for %s", d.o.Timeout, what)
			if e := d.errs.err(); e != nil {
				return fmt.Errorf("%s; function errors: %w", msg, e)
			}
			return errors.New(msg)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted while waiting for %s: %w", what, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func scale(ctx context.Context, deps interface {
	UpdateScale(context.Context, string, *autoscalingv1.Scale, metav1.UpdateOptions) (*autoscalingv1.Scale, error)
	GetScale(context.Context, string, metav1.GetOptions) (*autoscalingv1.Scale, error)
}, name string, replicas int32) error {
	for attempt := 0; ; attempt++ {
		sc, err := deps.GetScale(ctx, name, metav1.GetOptions{})
		if err == nil {
			sc.Spec.Replicas = replicas
			_, err = deps.UpdateScale(ctx, name, sc, metav1.UpdateOptions{})
		}
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) || attempt > 5 {
			return fmt.Errorf("scale deployment %s to %d: %w", name, replicas, err)
		}
	}
}

// createPods creates n pods from the Deployment's template concurrently.
func createPods(ctx context.Context, kc kubernetes.Interface, dep *appsv1.Deployment, n int) error {
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < n; i++ {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("inflate-burst-%04d", i), Namespace: dep.Namespace, Labels: dep.Spec.Template.Labels},
			Spec:       *dep.Spec.Template.Spec.DeepCopy(),
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := kc.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = fmt.Errorf("create pod %s: %w", pod.Name, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return firstErr
}

func typesString(m map[string]int) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%dx %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

// observer watches pods, nodes and instances and prints their changes.
type observer struct {
	d  *run
	ns string

	mu        sync.Mutex
	podC      podCounts
	nodes     map[string]bool // name -> Ready
	instances map[string]instanceView
	known     map[string]bool // instances present before the demo
}

type instanceView struct {
	id, typ, zone, capacity, state string
	price                          float64
}

func newObserver(d *run, ns string) *observer {
	o := &observer{d: d, ns: ns, nodes: map[string]bool{}, instances: map[string]instanceView{}, known: map[string]bool{}}
	for _, in := range d.cloud.AWS.EC2().Instances() {
		o.known[sdkaws.ToString(in.InstanceId)] = true
	}
	return o
}

func (o *observer) pods() podCounts {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.podC
}

func (o *observer) nodeCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.nodes)
}

func (o *observer) liveInstances() []instanceView {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []instanceView
	for _, in := range o.instances {
		if in.state != string(ec2types.InstanceStateNameTerminated) {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (o *observer) loop(ctx context.Context) {
	first := true
	for {
		o.poll(ctx, first)
		first = false
		select {
		case <-ctx.Done():
			return
		case <-time.After(150 * time.Millisecond):
		}
	}
}

func (o *observer) poll(ctx context.Context, first bool) {
	tl := o.d.tl
	if pods, err := o.d.kc.CoreV1().Pods(o.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"}); err == nil {
		c := countPods(pods.Items)
		o.mu.Lock()
		changed := c != o.podC
		o.podC = c
		o.mu.Unlock()
		if changed && !first {
			tl.printf("%-12s %s", "cluster", c)
		}
	}
	if nodes, err := o.d.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apis.NodePoolLabelKey}); err == nil {
		seen := map[string]bool{}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			seen[n.Name] = true
			ready := nodeReady(n)
			o.mu.Lock()
			was, ok := o.nodes[n.Name]
			o.nodes[n.Name] = ready
			o.mu.Unlock()
			switch {
			case !ok:
				tl.printf("%-12s node %s joined (%s, %s, %s), Ready=%v", "cluster", n.Name, n.Labels[corev1.LabelInstanceTypeStable],
					n.Labels[corev1.LabelTopologyZone], n.Labels[apis.CapacityTypeLabelKey], ready)
			case was != ready:
				tl.printf("%-12s node %s Ready=%v", "cluster", n.Name, ready)
			}
		}
		o.mu.Lock()
		for name := range o.nodes {
			if !seen[name] {
				delete(o.nodes, name)
				o.mu.Unlock()
				tl.printf("%-12s node %s gone", "cluster", name)
				o.mu.Lock()
			}
		}
		o.mu.Unlock()
	}
	sim := o.d.cloud.AWS.EC2()
	for _, in := range sim.Instances() {
		id := sdkaws.ToString(in.InstanceId)
		if o.known[id] {
			continue
		}
		_, capacity, _ := sim.Instance(id)
		v := instanceView{id: id, typ: string(in.InstanceType), capacity: capacity}
		if in.Placement != nil {
			v.zone = sdkaws.ToString(in.Placement.AvailabilityZone)
		}
		if in.State != nil {
			v.state = string(in.State.Name)
		}
		if capacity == "spot" {
			v.price, _ = sim.SpotPrice(v.typ, v.zone)
		} else {
			v.price, _ = sim.OnDemandPrice(v.typ)
		}
		o.mu.Lock()
		prev, ok := o.instances[id]
		o.instances[id] = v
		o.mu.Unlock()
		if !ok || prev.state != v.state {
			tl.printf("%-12s instance %s (%s %s %s $%.4f/h) %s", "ec2", id, v.typ, v.zone, v.capacity, v.price, v.state)
		}
	}
}
