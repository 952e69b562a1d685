package localcloud

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
	"github.com/nodewright/nodewright/internal/localcloud/dynalite"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// Components selects what Start runs.
type Components uint8

const (
	// ControlPlane is etcd, kube-apiserver, kube-controller-manager,
	// kube-scheduler and KWOK.
	ControlPlane Components = 1 << iota
	// DynamoDB is dynalite.
	DynamoDB
	// AWS is the wire-protocol simulator (EC2, SSM, Pricing, SQS,
	// EventBridge, EKS, STS) and its kubelet emulation.
	AWS

	// All is every component; the zero Components means All.
	All = ControlPlane | DynamoDB | AWS
)

// Has reports whether c includes every component in o.
func (c Components) Has(o Components) bool { return c&o == o }

// Fake credentials the local cloud accepts (the simulator verifies EKS
// tokens signed with them); real ones are never needed.
const (
	AccessKeyID     = awssim.DefaultAccessKeyID
	SecretAccessKey = awssim.DefaultSecretAccessKey
)

// IAMMode is whether the local cloud enforces the stack's IAM policies.
type IAMMode int

const (
	// IAMEnforced evaluates every call signed as a deployed stack's role
	// under the policies `cdk synth` produced for it.
	IAMEnforced IAMMode = iota
	// IAMOff lets every call through.
	IAMOff
)

// Options configure Start.
type Options struct {
	// Components to run; zero means All.
	Components Components
	// Region the simulator pretends to be in. Default us-west-2.
	Region string
	// ClusterName of the simulated EKS cluster. Default "local".
	ClusterName string
	// Logger receives progress messages; nil discards them.
	Logger *slog.Logger
	// TableStateDelay is how long dynalite keeps tables CREATING/DELETING.
	TableStateDelay time.Duration
	// IAM says whether the simulator evaluates the stack's IAM policies
	// (IAMEnforced, the default) for callers signing as a deployed stack's
	// roles (Deploy). IAMOff is for unit tests of the simulator itself.
	IAM IAMMode
	// Sim holds further simulator options (catalog or AWSDataDir, delays,
	// time scale, identities, seed). Region, ClusterName, KubernetesVersion
	// and Logger are filled in from the fields above when empty.
	Sim awssim.Options
	// Users are further static-token users of the API server
	// (Plane.UserRESTConfig), and AuditGroups further groups whose requests
	// Plane.Audit logs beside the controllers': how a test runs another
	// controller (Karpenter) next to nodewright and checks what it did.
	Users       []kubeplane.User
	AuditGroups []string
	// NodeLease and NodeGrace are KWOK's node lease duration and the
	// controller manager's wait for it (kubeplane.Options).
	NodeLease, NodeGrace time.Duration
	// APIServerProfiling serves the API server's /debug/pprof.
	APIServerProfiling bool
}

func (o *Options) defaults() {
	if o.Components == 0 {
		o.Components = All
	}
	if o.Region == "" {
		o.Region = "us-west-2"
	}
	if o.ClusterName == "" {
		o.ClusterName = "local"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Cloud is a running local cloud. Fields of components not started are zero.
type Cloud struct {
	Region      string
	ClusterName string

	// Kubeconfig is the path of an admin kubeconfig (static token).
	Kubeconfig string
	// REST is the admin client configuration; copy it before changing it.
	REST *rest.Config
	// ControllerREST authenticates as the controllers, with exactly their
	// RBAC rights (access.ControllerClusterRole): what a test gives the
	// functions it runs.
	ControllerREST *rest.Config
	// ShadowREST authenticates as a shadow-mode stack's functions, with
	// shadow mode's read-only rights (access.ShadowClusterRole through
	// access.ShadowGroup, as the registrar applies them): what a test
	// gives the functions it runs in shadow mode.
	ShadowREST *rest.Config
	// KubeClient is an admin clientset.
	KubeClient kubernetes.Interface
	// DynamoDBEndpoint is dynalite's URL.
	DynamoDBEndpoint string
	// AWSEndpoint is the simulator's URL, for every other AWS service.
	AWSEndpoint string

	// Plane, Dynalite and AWS give tests access to the components
	// themselves (fault injection, call log, capacity, spot reclaims...).
	Plane    *kubeplane.Plane
	Dynalite *dynalite.Server
	AWS      *awssim.Server

	// StartupTimes records how long each component took to become ready.
	StartupTimes map[string]time.Duration

	// iamTemplate is the synthesized stack whose roles Deploy registers;
	// nil when IAM is not enforced.
	iamTemplate *iam.Template
	// shadowTpl is the shadow-mode template, synthesized on a first
	// shadow deployment (shadowTemplate).
	shadowOnce sync.Once
	shadowTpl  *iam.Template
	shadowErr  error
	expected   expectations

	closeOnce sync.Once
	closeErr  error
}

// Start runs the selected components and returns once all are ready. On
// error everything already started is stopped.
func Start(ctx context.Context, opts Options) (_ *Cloud, err error) {
	opts.defaults()
	c := &Cloud{Region: opts.Region, ClusterName: opts.ClusterName, StartupTimes: map[string]time.Duration{}}
	defer func() {
		if err != nil {
			c.Close()
		}
	}()
	start := time.Now()

	// The simulator comes first: the API server's token webhook points at it.
	if opts.Components.Has(AWS) {
		if err := c.startAWS(opts); err != nil {
			return nil, err
		}
	}
	if err := c.startBackends(ctx, opts); err != nil {
		return nil, err
	}
	if c.Plane != nil {
		if err := c.applyAccess(ctx); err != nil {
			return nil, err
		}
	}

	if c.AWS != nil && c.Plane != nil {
		// EKS DescribeCluster reports the real endpoint and CA, and the
		// simulator's kubelets register Nodes for running instances.
		c.AWS.SetEKSCluster(c.Plane.Endpoint, c.Plane.CAData, minorVersion(kubeplane.KubeVersion))
		if err := c.AWS.SetKube(c.Plane.RESTConfig()); err != nil {
			return nil, fmt.Errorf("local cloud: %w", err)
		}
	}
	c.StartupTimes["total"] = time.Since(start)
	opts.Logger.InfoContext(ctx, "local cloud ready", "took", c.StartupTimes["total"].Round(time.Millisecond))
	return c, nil
}

// localConsistency is how long a launched instance stays unknown to
// DescribeInstances and TerminateInstances in a local cloud (simulator
// rule launch-consistency): a second, but at most half its pending time.
// EC2 documents no duration; every read and termination right after a
// launch meets it, and EC2 shows an instance while it is still pending, as
// a real one is long before it boots (the local cloud's pending and
// registration delays are compressed).
func localConsistency(pending time.Duration) time.Duration {
	if pending <= 0 {
		pending = awssim.DefaultPendingDelay
	}
	return min(time.Second, pending/2)
}

// startAWS starts the AWS simulator with opts.Sim, filled from the cloud's
// options where unset.
func (c *Cloud) startAWS(opts Options) error {
	so := opts.Sim
	if so.Region == "" {
		so.Region = opts.Region
	}
	if so.ClusterName == "" {
		so.ClusterName = opts.ClusterName
	}
	if so.KubernetesVersion == "" {
		so.KubernetesVersion = minorVersion(kubeplane.KubeVersion)
	}
	if so.Logger == nil {
		so.Logger = opts.Logger
	}
	account := so.AccountID
	if account == "" {
		account = awssim.DefaultAccountID
	}
	if so.Identities == nil {
		so.Identities = identities(account)
	}
	if so.Delays.Consistency == 0 {
		so.Delays.Consistency = localConsistency(so.Delays.Pending)
	}
	t := time.Now()
	sim, err := awssim.New(so)
	if err != nil {
		return fmt.Errorf("local cloud: %w", err)
	}
	sim.AddCredentials(ControllerAccessKeyID, ControllerSecretAccessKey, controllerCallerARN(account))
	// A local cloud stands for an account sized for its clusters: the vCPU
	// quotas a scale run needs are granted (a test of the quota rules lowers
	// them again; the simulator's own defaults are a typical account's).
	sim.RaiseEC2VCPUQuotas(localVCPUQuota)
	c.AWS = sim
	c.AWSEndpoint = sim.URL()
	c.StartupTimes["awssim"] = time.Since(t)
	return nil
}

// localVCPUQuota is every EC2 vCPU quota of a local cloud: room for the
// 2,000-node scale runs on the largest types.
const localVCPUQuota = 1_000_000

// backendStart is what startBackends' concurrent starts report.
type backendStart struct {
	dyn       *dynalite.Server
	dynErr    error
	dynTime   time.Duration
	iamErr    error
	iamTime   time.Duration
	plane     *kubeplane.Plane
	planeErr  error
	planeTime time.Duration
}

// startBackends starts dynalite, the control plane and the IAM template
// synthesis, which are independent, together.
func (c *Cloud) startBackends(ctx context.Context, opts Options) error {
	var wg sync.WaitGroup
	var r backendStart
	if opts.Components.Has(DynamoDB) {
		wg.Go(func() {
			t := time.Now()
			srv, err := dynalite.Start(ctx, dynalite.Options{TableStateDelay: opts.TableStateDelay, Logger: opts.Logger})
			if err != nil {
				r.dynErr = fmt.Errorf("local cloud: %w", err)
				return
			}
			r.dyn, r.dynTime = srv, time.Since(t)
		})
	}
	if opts.Components.Has(AWS) && opts.IAM == IAMEnforced {
		wg.Go(func() {
			t := time.Now()
			c.iamTemplate, r.iamErr = IAMTemplate(ctx)
			r.iamTime = time.Since(t)
		})
	}
	if opts.Components.Has(ControlPlane) {
		t := time.Now()
		po := kubeplane.Options{Logger: opts.Logger, NodeLease: opts.NodeLease, NodeGrace: opts.NodeGrace, Profiling: opts.APIServerProfiling}
		planeAccessOptions(&po)
		po.Users = append(po.Users, opts.Users...)
		po.AuditGroups = append(po.AuditGroups, opts.AuditGroups...)
		if c.AWS != nil {
			po.TokenWebhookURL = c.AWS.TokenReviewURL()
		}
		r.plane, r.planeErr = kubeplane.Start(ctx, po)
		if r.planeErr != nil {
			r.planeErr = fmt.Errorf("local cloud: %w", r.planeErr)
		}
		r.planeTime = time.Since(t)
	}
	wg.Wait()
	c.recordBackends(&r)
	return errors.Join(r.dynErr, r.planeErr, r.iamErr)
}

// recordBackends keeps whatever started, even if something else failed, so
// Close stops it.
func (c *Cloud) recordBackends(r *backendStart) {
	if r.dyn != nil {
		c.Dynalite = r.dyn
		c.DynamoDBEndpoint = r.dyn.Endpoint()
		if c.AWS != nil {
			// DynamoDB calls go through the simulator, which authorizes
			// them as it does every other AWS call.
			c.AWS.SetDynamoDBUpstream(r.dyn.Endpoint())
			c.DynamoDBEndpoint = c.AWSEndpoint
		}
		c.StartupTimes["dynalite"] = r.dynTime
	}
	if r.plane != nil {
		c.Plane = r.plane
		c.Kubeconfig = r.plane.Kubeconfig
		c.REST = r.plane.RESTConfig()
		c.KubeClient = r.plane.Client()
		c.StartupTimes["controlplane"] = r.planeTime
	}
	if c.iamTemplate != nil {
		c.StartupTimes["iam"] = r.iamTime
	}
}

// minorVersion turns v1.36.3 into 1.36, the form EKS uses.
func minorVersion(v string) string {
	v = strings.TrimPrefix(v, "v")
	if i := strings.LastIndexByte(v, '.'); strings.Count(v, ".") == 2 {
		return v[:i]
	}
	return v
}

// Prepare builds the control plane binaries, installs dynalite and
// synthesizes the stack whose IAM policies the simulator enforces, into the
// cache, without starting anything (a CI warm-up step, or a first run with
// visible progress). Each is a no-op when already cached.
func Prepare(ctx context.Context, logger *slog.Logger) error {
	var wg sync.WaitGroup
	var dynErr, iamErr error
	wg.Go(func() { _, dynErr = dynalite.Install(ctx, logger) })
	wg.Go(func() { _, iamErr = IAMTemplate(ctx) })
	_, binErr := kubeplane.EnsureBinaries(ctx, logger)
	wg.Wait()
	return errors.Join(binErr, dynErr, iamErr)
}

// Env is the environment a process needs to use this local cloud with the
// unmodified AWS SDK and client-go: endpoint overrides, region, fake
// credentials, KUBECONFIG and the cluster name.
func (c *Cloud) Env() []string {
	env := []string{
		"AWS_REGION=" + c.Region,
		"AWS_DEFAULT_REGION=" + c.Region,
		"AWS_ACCESS_KEY_ID=" + AccessKeyID,
		"AWS_SECRET_ACCESS_KEY=" + SecretAccessKey,
		// Never fall back to an instance role or IMDS on a developer machine.
		"AWS_EC2_METADATA_DISABLED=true",
		"NODEWRIGHT_CLUSTER_NAME=" + c.ClusterName,
	}
	if c.AWSEndpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL="+c.AWSEndpoint)
	}
	if c.DynamoDBEndpoint != "" {
		env = append(env, "AWS_ENDPOINT_URL_DYNAMODB="+c.DynamoDBEndpoint)
	}
	if c.Kubeconfig != "" {
		env = append(env, "KUBECONFIG="+c.Kubeconfig)
	}
	return env
}

// TableARN is the ARN of DynamoDB table table in this cloud's region and
// account: what the CDK app passes the functions as their owner value
// (settings.EnvOwner), so local stacks own their instances the same way.
func (c *Cloud) TableARN(table string) string {
	return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", c.Region, awssim.DefaultAccountID, table)
}

// Close stops every component and removes their temporary files: the
// simulator first (so its kubelets stop calling the API server), then the
// control plane and dynalite together. Safe to call more than once.
func (c *Cloud) Close() error {
	c.closeOnce.Do(func() {
		var errs []error
		if c.AWS != nil {
			errs = append(errs, c.AWS.Close())
		}
		var wg sync.WaitGroup
		var planeErr, dynErr error
		if c.Plane != nil {
			wg.Go(func() { planeErr = c.Plane.Close() })
		}
		if c.Dynalite != nil {
			wg.Go(func() { dynErr = c.Dynalite.Close() })
		}
		wg.Wait()
		c.closeErr = errors.Join(append(errs, planeErr, dynErr)...)
	})
	return c.closeErr
}

// SaveLogs copies every component's log into a new directory that Close
// does not remove, and returns its path: for a failed test to point at.
func (c *Cloud) SaveLogs() (string, error) {
	var logs []string
	if c.Plane != nil {
		for _, n := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"} {
			logs = append(logs, c.Plane.LogPath(n))
		}
	}
	if c.Dynalite != nil && c.Dynalite.LogPath() != "" {
		logs = append(logs, c.Dynalite.LogPath())
	}
	dir, err := os.MkdirTemp("", "nodewright-localcloud-logs-")
	if err != nil {
		return "", fmt.Errorf("save local cloud logs: %w", err)
	}
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue // a component that never started has no log
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(l)), b, 0o644); err != nil {
			return "", fmt.Errorf("save local cloud logs: %w", err)
		}
	}
	return dir, nil
}

// PIDs lists every child process of the cloud (for leak checks and state
// files).
func (c *Cloud) PIDs() []int {
	var pids []int
	if c.Plane != nil {
		pids = append(pids, c.Plane.PIDs()...)
	}
	if c.Dynalite != nil && c.Dynalite.PID() != 0 {
		pids = append(pids, c.Dynalite.PID())
	}
	return pids
}
