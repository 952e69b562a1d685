// Package app wires the adapters one nodewright function needs — DynamoDB
// store, EKS client, EC2 provider, work queue, metrics and the loaded
// NodePool/EC2NodeClass configuration — from the function's settings. The
// Lambda entry points in functions/ and the local demo build the same App,
// so the demo exercises exactly what runs in AWS.
package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/shadow"
	"github.com/nodewright/nodewright/internal/store"
)

// App holds a function's adapters. Fields are safe for concurrent use.
type App struct {
	Settings  settings.Settings
	Log       *slog.Logger
	AWSConfig sdkaws.Config
	Store     *store.Store
	Kube      *kube.Client
	EC2       *nwaws.Provider
	SQS       *sqs.Client
	// Wakeups is the disruption function's wake-up queue; nil when its URL
	// is not configured.
	Wakeups *queue.Queue
	// Work is the lifecycle's delayed-work queue; nil when its URL is not
	// configured.
	Work *queue.Queue
	// Provision is the provisioner's nudge queue (the webhook's, and the
	// lifecycle's when a static NodePool's node goes); nil when its URL is
	// not configured.
	Provision *queue.Queue
	Metrics   *metrics.Recorder
	// Config is the NodePool / EC2NodeClass configuration, loaded and
	// validated from Settings.ConfigDir at start.
	Config *apis.Config
	Now    func() time.Time
	// Cluster and Cloud are what the controllers act through: Kube and EC2
	// themselves, or in shadow mode adapters that make no change (see
	// wireActing).
	Cluster clusterClient
	Cloud   cloudClient
	// Shadow records the provisioning passes' plans in shadow mode; nil
	// otherwise.
	Shadow *shadow.Recorder
	// claims is the provisioner's NodeClaim store (Store, or in shadow mode
	// one that keeps its claims in memory).
	claims   provisioning.Store
	function string
}

// Options let callers (tests, the demo) replace parts of the wiring.
type Options struct {
	// Function names the function in logs and metric dimensions.
	Function string
	// Out receives JSON logs and EMF metric lines (default: discard).
	Out io.Writer
	// KubeREST, when set, is used instead of discovering the cluster through
	// EKS DescribeCluster with an STS token (tests with an admin config).
	KubeREST *rest.Config
	// Config, when set, is used instead of loading Settings.ConfigDir.
	Config *apis.Config
	Now    func() time.Time
	// HTTPClient, when set, carries every AWS call (tests that kill the
	// process between two calls: cloudtest.Crasher).
	HTTPClient sdkaws.HTTPClient
	// AWSCredentials, when set, sign every AWS call instead of the default
	// chain's (the local cloud's per-role credentials, localcloud.Stack).
	AWSCredentials sdkaws.CredentialsProvider
}

// New builds an App for settings s.
func New(ctx context.Context, s settings.Settings, o Options) (*App, error) {
	if err := s.Require(settings.EnvClusterName, settings.EnvTableName, settings.EnvOwner); err != nil {
		return nil, err
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	base := settings.Logger(o.Out, s.LogLevel, o.Function)
	log := base.With("cluster", s.ClusterName)
	cfg := o.Config
	if cfg == nil {
		if s.ConfigDir == "" {
			return nil, fmt.Errorf("%s is not set and no configuration was given", settings.EnvConfigDir)
		}
		loaded, err := apis.Load(s.ConfigDir)
		if err != nil {
			return nil, fmt.Errorf("load NodePool/EC2NodeClass configuration from %s: %w", s.ConfigDir, err)
		}
		for _, w := range loaded.Warnings {
			log.Warn("configuration", "warning", w)
		}
		cfg = loaded
	}

	var loadOpts []func(*config.LoadOptions) error
	if o.HTTPClient != nil {
		loadOpts = append(loadOpts, config.WithHTTPClient(o.HTTPClient))
	}
	if o.AWSCredentials != nil {
		loadOpts = append(loadOpts, config.WithCredentialsProvider(o.AWSCredentials))
	}
	clients, awsCfg, err := nwaws.NewClients(ctx, regionOf(ctx), loadOpts...)
	if err != nil {
		return nil, err
	}
	rec := metrics.New(o.Out, metrics.Dimensions{"cluster": s.ClusterName, "function": o.Function})
	st, err := store.New(store.NewDynamoDBClient(awsCfg), s.TableName, store.WithClock(o.Now), store.WithUndecodable(reportUndecodable(log, rec)))
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	ice := nwaws.NewICECache(awsstore.ICE{Store: st}, 3*time.Minute, o.Now)
	provider, err := nwaws.New(nwaws.Options{ClusterName: s.ClusterName, Region: awsCfg.Region, Owner: s.Owner, Now: o.Now, Logger: base,
		MinValuesBestEffort: s.Scheduling.MinValuesPolicy == settings.MinValuesBestEffort}, clients, ice)
	if err != nil {
		return nil, err
	}

	var kc *kube.Client
	if o.KubeREST != nil {
		kc, err = kube.NewClient(rest.CopyConfig(o.KubeREST), log)
	} else {
		kc, err = kube.ForEKS(ctx, awsCfg, eks.NewFromConfig(awsCfg), s.ClusterName, kube.Options{}, log)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to cluster %s: %w", s.ClusterName, err)
	}

	sqsClient := sqs.NewFromConfig(awsCfg)
	a := &App{
		Settings:  s,
		Log:       log,
		AWSConfig: awsCfg,
		Store:     st,
		Kube:      kc,
		EC2:       provider,
		SQS:       sqsClient,
		Metrics:   rec,
		Config:    cfg,
		Now:       o.Now,
		function:  o.Function,
	}
	a.wireActing()
	a.Work, a.Wakeups, a.Provision = queueOf(sqsClient, s.WorkQueueURL), queueOf(sqsClient, s.DisruptionQueueURL), queueOf(sqsClient, s.ProvisionQueueURL)
	return a, nil
}

// queueOf is the queue at url, nil when url is not configured.
func queueOf(c *sqs.Client, url string) *queue.Queue {
	if url == "" {
		return nil
	}
	return queue.New(c, url)
}

// regionOf reads the region the SDK would use; the default config chain
// (AWS_REGION, profile) decides, as in Lambda where AWS_REGION is always set.
func regionOf(ctx context.Context) string {
	cfg, err := settings.AWSConfig(ctx)
	if err != nil {
		return ""
	}
	return cfg.Region
}

// reportUndecodable logs and counts a claim record the store skipped (the
// stack alarms on the count).
func reportUndecodable(log *slog.Logger, rec *metrics.Recorder) func(context.Context, store.Undecodable) {
	return func(ctx context.Context, u store.Undecodable) {
		log.WarnContext(ctx, "skipping undecodable nodeclaim record", "key", u.Key, "nodeclaim", u.Name, "error", u.Err)
		rec.Add(metrics.NodeClaimsUndecodable, 1, nil)
	}
}
