// Package demo is `nodewright demo` (`make demo`): on the local cloud it
// runs nodewright's real function handlers as AWS runs them
// (internal/localrun: the webhook called by the API server, the functions
// fed by their queues and schedules, signing as the stack's roles) while a
// Deployment scales from 0 to N pods and back, and measures. The timeline
// printed is rendered from the functions' own logs and from what the
// cluster and the cloud show.
package demo

import (
	"context"
	"embed"
	"fmt"
	"io"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/basedeps"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localrun"
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
	// Lambda sets the random faults of Lambda, SQS and EventBridge
	// (default: localrun's, on at modest rates).
	Lambda localrun.LambdaOptions
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
	// Faults are the random faults' settings (localrun.LambdaOptions.Rates)
	// and Lambda what Lambda, SQS and EventBridge did to the functions.
	Faults string
	Lambda localrun.LambdaStats
}

// Line is the demo's last line; it ends with the IAM verdict.
func (r Result) Line() string {
	return fmt.Sprintf("DEMO OK pods=%d running=%d nodes=%d cost_per_hour=%.4f time_to_running_s=%.1f scale_down_s=%.1f faults=%s lambda=%s iam=%s denied=%d",
		r.Pods, r.Running, r.Nodes, r.CostPerHour, r.TimeToRunning.Seconds(), r.ScaleDown.Seconds(), r.Faults, r.Lambda, r.IAM, r.IAMDenied)
}

// Run runs the demo. It stops everything it started before returning, also
// when ctx is cancelled (Ctrl-C).
func Run(ctx context.Context, o Options) (res Result, err error) {
	basedeps.Default(&o.Replicas, 10)
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Logs == nil {
		o.Logs = io.Discard
	}
	basedeps.Default(&o.Tick, 5*time.Second)
	basedeps.Default(&o.RegistrationCheck, 3*time.Second)
	basedeps.Default(&o.Timeout, 5*time.Minute)
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
	tl := localrun.NewTimeline(o.Out, time.Now())

	cloud := o.Cloud
	if cloud == nil {
		tl.Printf("starting the local cloud (kube-apiserver + KWOK, dynalite, AWS simulator; the first run builds them)")
		cloud, err = localcloud.Start(ctx, CloudOptions(o.Progress))
		if err != nil {
			return res, fmt.Errorf("start the local cloud: %w", err)
		}
		defer cloud.Close()
		tl.Printf("local cloud ready in %s (EKS cluster %s in %s)", cloud.StartupTimes["total"].Round(time.Millisecond), cloud.ClusterName, cloud.Region)
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
	tl    *localrun.Timeline
	cloud *localcloud.Cloud
	kc    kubernetes.Interface

	sys     *localrun.System
	closers []func()
}

func (d *run) cleanup() {
	if d.sys != nil {
		d.sys.Close()
	}
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}
