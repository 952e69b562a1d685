// Package settings reads a function's configuration from its environment, as
// the CDK app sets it, and builds the shared AWS config and JSON logger. Every
// function reads the same names so the CDK app and the local demo set them
// in one place.
package settings

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
)

// Environment variable names, shared with infra/ and the local demo.
const (
	EnvClusterName       = "NODEWRIGHT_CLUSTER_NAME"
	EnvTableName         = "NODEWRIGHT_TABLE_NAME"
	EnvWorkQueueURL      = "NODEWRIGHT_WORK_QUEUE_URL"
	EnvProvisionQueueURL = "NODEWRIGHT_PROVISION_QUEUE_URL"
	EnvInterruptionQueue = "NODEWRIGHT_INTERRUPTION_QUEUE_URL"
	EnvWebhookSecret     = "NODEWRIGHT_WEBHOOK_SECRET"
	EnvWebhookSecretARN  = "NODEWRIGHT_WEBHOOK_SECRET_ARN"
	EnvConfigDir         = "NODEWRIGHT_CONFIG_DIR"
	EnvRebalance         = "NODEWRIGHT_REBALANCE"
	EnvBatchIdle         = "NODEWRIGHT_BATCH_IDLE"
	EnvBatchMax          = "NODEWRIGHT_BATCH_MAX"
	EnvLogLevel          = "NODEWRIGHT_LOG_LEVEL"
	EnvNodeRoleName      = "NODEWRIGHT_NODE_ROLE_NAME"
	EnvNodeRoleARN       = "NODEWRIGHT_NODE_ROLE_ARN"
	EnvInstanceProfile   = "NODEWRIGHT_NODE_INSTANCE_PROFILE"
	EnvWebhookPrefix     = "NODEWRIGHT_WEBHOOK_PATH_PREFIX"
	// EnvRegistrarTrust holds, as JSON, the properties of the stack's
	// custom resources the registrar may act on (functions/webhookregistrar).
	EnvRegistrarTrust = "NODEWRIGHT_REGISTRAR_TRUST"
	// EnvOwner is the stack-unique owner value (the CDK app sets the
	// NodeClaim table's ARN) every resource nodewright creates is tagged
	// with under aws.TagOwner.
	EnvOwner = "NODEWRIGHT_OWNER"
	// EnvGCMaxShare (a fraction, default 0.1) and EnvGCMaxInstances
	// (default 5) bound how many orphaned instances one lifecycle pass may
	// collect: the larger of the two.
	EnvGCMaxShare     = "NODEWRIGHT_GC_MAX_SHARE"
	EnvGCMaxInstances = "NODEWRIGHT_GC_MAX_INSTANCES"
)

// The disruption function's wake-up queue (its delayed messages re-invoke
// the function before the next tick) and the period of its schedule
// (default 1m), so a pass knows whether the next tick comes too late for a
// candidate that becomes eligible sooner.
const (
	EnvDisruptionQueueURL = "NODEWRIGHT_DISRUPTION_QUEUE_URL"
	EnvDisruptionSchedule = "NODEWRIGHT_DISRUPTION_SCHEDULE"
)

// Settings is what a function knows about its deployment.
type Settings struct {
	ClusterName string
	TableName   string
	// WorkQueueURL is the lifecycle's delayed-work queue.
	WorkQueueURL string
	// ProvisionQueueURL carries the webhook's nudges to the provisioner.
	ProvisionQueueURL string
	InterruptionQueue string
	WebhookSecret     string
	WebhookSecretARN  string
	ConfigDir         string
	// Rebalance is "ignore" (Karpenter's behaviour) or "replace".
	Rebalance       string
	BatchIdle       time.Duration
	BatchMax        time.Duration
	LogLevel        slog.Level
	NodeRoleName    string
	NodeRoleARN     string
	InstanceProfile string
	// Owner is the value of the owner tag (see EnvOwner).
	Owner string
	// GCMaxShare and GCMaxInstances bound garbage collection (0: the
	// lifecycle's defaults).
	GCMaxShare     float64
	GCMaxInstances int
	// FeatureGates are the Karpenter-style gates (see EnvFeatureGates).
	FeatureGates FeatureGates
	// DisruptionQueueURL is the disruption function's wake-up queue.
	DisruptionQueueURL string
	// DisruptionSchedule is the disruption schedule's period (0: the
	// disruption function's default).
	DisruptionSchedule time.Duration
	// Mode is ModeNormal or ModeShadow (see EnvMode).
	Mode string
	// Scheduling are Karpenter's planning settings (scheduling.go).
	Scheduling Scheduling
}

// FromEnv reads Settings from getenv (os.Getenv in production).
func FromEnv(getenv func(string) string) (Settings, error) {
	s := Settings{
		ClusterName:       getenv(EnvClusterName),
		TableName:         getenv(EnvTableName),
		WorkQueueURL:      getenv(EnvWorkQueueURL),
		ProvisionQueueURL: getenv(EnvProvisionQueueURL),
		InterruptionQueue: getenv(EnvInterruptionQueue),
		WebhookSecret:     getenv(EnvWebhookSecret),
		WebhookSecretARN:  getenv(EnvWebhookSecretARN),
		ConfigDir:         getenv(EnvConfigDir),
		Rebalance:         "ignore",
		BatchIdle:         time.Second,
		BatchMax:          10 * time.Second,
		NodeRoleName:      getenv(EnvNodeRoleName),
		NodeRoleARN:       getenv(EnvNodeRoleARN),
		InstanceProfile:   getenv(EnvInstanceProfile),
		Owner:             getenv(EnvOwner),
	}
	if v := getenv(EnvRebalance); v != "" {
		if v != "ignore" && v != "replace" {
			return s, fmt.Errorf("%s=%q: want ignore or replace", EnvRebalance, v)
		}
		s.Rebalance = v
	}
	var err error
	if s.BatchIdle, err = duration(getenv, EnvBatchIdle, s.BatchIdle); err != nil {
		return s, err
	}
	if s.BatchMax, err = duration(getenv, EnvBatchMax, s.BatchMax); err != nil {
		return s, err
	}
	s.DisruptionQueueURL = getenv(EnvDisruptionQueueURL)
	if s.DisruptionSchedule, err = duration(getenv, EnvDisruptionSchedule, 0); err != nil {
		return s, err
	}
	if s.BatchMax < s.BatchIdle {
		return s, fmt.Errorf("%s (%s) is shorter than %s (%s)", EnvBatchMax, s.BatchMax, EnvBatchIdle, s.BatchIdle)
	}
	if v := getenv(EnvGCMaxShare); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 || f > 1 {
			return s, fmt.Errorf("%s=%q: want a fraction in (0, 1]", EnvGCMaxShare, v)
		}
		s.GCMaxShare = f
	}
	if v := getenv(EnvGCMaxInstances); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return s, fmt.Errorf("%s=%q: want a positive integer", EnvGCMaxInstances, v)
		}
		s.GCMaxInstances = n
	}
	if s.FeatureGates, err = ParseFeatureGates(getenv(EnvFeatureGates)); err != nil {
		return s, err
	}
	if s.Mode, err = parseMode(getenv(EnvMode)); err != nil {
		return s, err
	}
	if s.Scheduling, err = schedulingFromEnv(getenv); err != nil {
		return s, err
	}
	if v := getenv(EnvLogLevel); v != "" {
		if err := s.LogLevel.UnmarshalText([]byte(v)); err != nil {
			return s, fmt.Errorf("%s=%q: %w", EnvLogLevel, v, err)
		}
	}
	return s, nil
}

// Require reports the first of the named settings that is empty.
func (s Settings) Require(names ...string) error {
	values := map[string]string{
		EnvClusterName: s.ClusterName, EnvTableName: s.TableName, EnvWorkQueueURL: s.WorkQueueURL, EnvProvisionQueueURL: s.ProvisionQueueURL,
		EnvInterruptionQueue: s.InterruptionQueue, EnvConfigDir: s.ConfigDir, EnvOwner: s.Owner,
	}
	for _, n := range names {
		if values[n] == "" {
			return fmt.Errorf("%s is not set", n)
		}
	}
	return nil
}

func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return d, nil
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return time.Duration(n) * time.Second, nil
	}
	return 0, fmt.Errorf("%s=%q is not a duration", name, v)
}

// Logger returns the JSON logger every function uses; Lambda ships stdout
// lines to CloudWatch Logs as they are.
func Logger(w io.Writer, level slog.Level, function string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})).With("function", function)
}

// AWSConfig loads the SDK configuration. Endpoints honour AWS_ENDPOINT_URL and
// AWS_ENDPOINT_URL_<SERVICE>, which is how the local cloud is reached.
func AWSConfig(ctx context.Context) (aws.Config, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return aws.Config{}, fmt.Errorf("load AWS config: %w", err)
	}
	return cfg, nil
}

// Getenv is os.Getenv, named so callers read as FromEnv(settings.Getenv).
func Getenv(k string) string { return os.Getenv(k) }
