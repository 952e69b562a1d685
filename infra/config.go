// Package infra is nodewright's CDK app: one stack per EKS cluster with the
// Lambda functions, their queues, schedules, table, IAM, EKS access entries,
// the webhook registration and the alarms. See README.md in this folder.
package infra

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Rebalance policies for EC2 rebalance recommendations (issue 7).
const (
	RebalanceIgnore  = "ignore"
	RebalanceReplace = "replace"
)

// EKS access modes for the controller role.
const (
	// AccessRBAC, the default: the controller role's access entry carries
	// no access policy, only the Kubernetes group access.ControllerGroup,
	// and the stack's Custom::NodewrightAccess resource binds that group to
	// access.ControllerClusterRole: exactly the rights the controllers use.
	AccessRBAC = "rbac"
	// AccessClusterAdmin associates AmazonEKSClusterAdminPolicy with the
	// controller role instead: an explicit opt-in (cluster-admin), for
	// clusters where RBAC objects must not be created by a stack.
	AccessClusterAdmin = "cluster-admin"
)

// Config is the typed input of one nodewright stack. FromContext fills it
// from cdk.json / -c context; Validate checks it.
type Config struct {
	// ClusterName is the EKS cluster this stack scales (required).
	ClusterName string
	// Account and Region pin the stack's environment; empty means
	// environment-agnostic (CloudFormation pseudo parameters).
	Account, Region string
	// ConfigDir holds the NodePool and EC2NodeClass YAML, validated at synth
	// and shipped to the functions as a Lambda layer (required).
	ConfigDir string

	// VpcID and SubnetIDs put the cluster-facing functions in a VPC, needed
	// when the cluster endpoint is private. SecurityGroupIDs are used as
	// given, otherwise the stack creates one (egress only).
	// ClusterSecurityGroupID, when set, gets an ingress rule on 443 from the
	// functions' security group.
	VpcID                  string
	SubnetIDs              []string
	SecurityGroupIDs       []string
	ClusterSecurityGroupID string

	// Schedule rates in minutes (EventBridge's minimum is one minute).
	ProvisionerRateMinutes int
	LifecycleRateMinutes   int
	DisruptionRateMinutes  int

	// Webhook enables the admission-webhook fast path. Without it the
	// provisioner still runs every ProvisionerRateMinutes.
	Webhook bool
	// WebhookCABundle is the PEM bundle the API server uses to verify the
	// webhook endpoint; empty means the embedded Amazon Root CAs, which sign
	// every Lambda function URL certificate.
	WebhookCABundle string
	// WebhookSecretGeneration is part of the registration's properties: bump
	// it after rotating the shared secret to re-register the URL.
	WebhookSecretGeneration int

	// Rebalance is what to do on EC2 rebalance recommendations.
	Rebalance string
	// LogRetentionDays must be a value CloudWatch Logs accepts.
	LogRetentionDays int
	// LogLevel is the functions' application log level (DEBUG, INFO, WARN, ERROR).
	LogLevel string

	// AlarmEmail subscribes an address to a topic the stack creates;
	// AlarmTopicArn sends alarms to an existing topic instead.
	AlarmEmail    string
	AlarmTopicArn string
	// OldestPendingPodAlarmSeconds alarms when a pod has been pending longer.
	OldestPendingPodAlarmSeconds int

	// NodeRoleName is the IAM role the stack creates for nodes; every
	// EC2NodeClass must name it in spec.role (or its instance profile, which
	// has the same name, in spec.instanceProfile).
	NodeRoleName string
	// EKSAccess is AccessClusterAdmin or AccessRBAC.
	EKSAccess string

	// AssetDir holds <function>/bootstrap as built by `make build`.
	AssetDir string
	// PlaceholderAssets synthesizes with placeholder function code when the
	// build output is missing (tests, CI synth); never deploy it.
	PlaceholderAssets bool
}

// Functions deployed by the stack, in the order of dist/<name>/bootstrap.
var Functions = []string{"webhook", "provisioner", "interruption", "disruption", "lifecycle", "webhookregistrar"}

// Defaults returns the configuration before context is applied.
func Defaults() Config {
	return Config{
		ProvisionerRateMinutes:       1,
		LifecycleRateMinutes:         1,
		DisruptionRateMinutes:        1,
		Webhook:                      true,
		WebhookSecretGeneration:      1,
		Rebalance:                    RebalanceIgnore,
		LogRetentionDays:             30,
		LogLevel:                     "INFO",
		OldestPendingPodAlarmSeconds: 300,
		EKSAccess:                    AccessRBAC,
		AssetDir:                     "dist",
	}
}

// Context keys (cdk.json "context" or `cdk synth -c key=value`).
const (
	CtxClusterName             = "clusterName"
	CtxAccount                 = "account"
	CtxRegion                  = "region"
	CtxConfigDir               = "configDir"
	CtxVpcID                   = "vpcId"
	CtxSubnetIDs               = "subnetIds"
	CtxSecurityGroupIDs        = "securityGroupIds"
	CtxClusterSecurityGroupID  = "clusterSecurityGroupId"
	CtxProvisionerRate         = "provisionerRateMinutes"
	CtxLifecycleRate           = "lifecycleRateMinutes"
	CtxDisruptionRate          = "disruptionRateMinutes"
	CtxWebhook                 = "webhook"
	CtxWebhookCABundleFile     = "webhookCABundleFile"
	CtxWebhookSecretGeneration = "webhookSecretGeneration"
	CtxRebalance               = "rebalance"
	CtxLogRetentionDays        = "logRetentionDays"
	CtxLogLevel                = "logLevel"
	CtxAlarmEmail              = "alarmEmail"
	CtxAlarmTopicArn           = "alarmTopicArn"
	CtxOldestPendingPodAlarm   = "oldestPendingPodAlarmSeconds"
	CtxNodeRoleName            = "nodeRoleName"
	CtxEKSAccess               = "eksAccess"
	CtxAssetDir                = "assetDir"
	CtxPlaceholderAssets       = "placeholderAssets"
)

// ContextGetter reads one context value (awscdk.App's Node().TryGetContext
// fits); nil means unset. Values given with -c arrive as strings, values in
// cdk.json keep their JSON types.
type ContextGetter func(key string) interface{}

// FromContext applies context values over Defaults. Account and Region fall
// back to CDK_DEFAULT_ACCOUNT / CDK_DEFAULT_REGION, which the CDK CLI sets
// from the caller's profile when there is one.
func FromContext(get ContextGetter) (Config, error) {
	c := Defaults()
	var errs []error
	str := func(key string, dst *string) {
		v := get(key)
		if v == nil {
			return
		}
		switch x := v.(type) {
		case string:
			*dst = strings.TrimSpace(x)
		case float64:
			*dst = strconv.FormatFloat(x, 'f', -1, 64)
		default:
			errs = append(errs, fmt.Errorf("context %s: want a string, got %T", key, v))
		}
	}
	integer := func(key string, dst *int) {
		v := get(key)
		if v == nil {
			return
		}
		switch x := v.(type) {
		case float64:
			if x != float64(int(x)) {
				errs = append(errs, fmt.Errorf("context %s: %v is not a whole number", key, x))
				return
			}
			*dst = int(x)
		case string:
			n, err := strconv.Atoi(strings.TrimSpace(x))
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s: %q is not a whole number", key, x))
				return
			}
			*dst = n
		default:
			errs = append(errs, fmt.Errorf("context %s: want a number, got %T", key, v))
		}
	}
	boolean := func(key string, dst *bool) {
		v := get(key)
		if v == nil {
			return
		}
		switch x := v.(type) {
		case bool:
			*dst = x
		case string:
			b, err := strconv.ParseBool(strings.TrimSpace(x))
			if err != nil {
				errs = append(errs, fmt.Errorf("context %s: %q is not true or false", key, x))
				return
			}
			*dst = b
		default:
			errs = append(errs, fmt.Errorf("context %s: want true or false, got %T", key, v))
		}
	}
	list := func(key string, dst *[]string) {
		v := get(key)
		if v == nil {
			return
		}
		var items []string
		switch x := v.(type) {
		case []interface{}:
			for _, it := range x {
				s, ok := it.(string)
				if !ok {
					errs = append(errs, fmt.Errorf("context %s: want a list of strings, found %T", key, it))
					return
				}
				items = append(items, s)
			}
		case string:
			x = strings.TrimSpace(x)
			if strings.HasPrefix(x, "[") {
				if err := json.Unmarshal([]byte(x), &items); err != nil {
					errs = append(errs, fmt.Errorf("context %s: %w", key, err))
					return
				}
			} else {
				items = strings.Split(x, ",")
			}
		default:
			errs = append(errs, fmt.Errorf("context %s: want a list or comma-separated string, got %T", key, v))
			return
		}
		*dst = nil
		for _, it := range items {
			if it = strings.TrimSpace(it); it != "" {
				*dst = append(*dst, it)
			}
		}
	}

	str(CtxClusterName, &c.ClusterName)
	str(CtxAccount, &c.Account)
	str(CtxRegion, &c.Region)
	str(CtxConfigDir, &c.ConfigDir)
	str(CtxVpcID, &c.VpcID)
	list(CtxSubnetIDs, &c.SubnetIDs)
	list(CtxSecurityGroupIDs, &c.SecurityGroupIDs)
	str(CtxClusterSecurityGroupID, &c.ClusterSecurityGroupID)
	integer(CtxProvisionerRate, &c.ProvisionerRateMinutes)
	integer(CtxLifecycleRate, &c.LifecycleRateMinutes)
	integer(CtxDisruptionRate, &c.DisruptionRateMinutes)
	boolean(CtxWebhook, &c.Webhook)
	integer(CtxWebhookSecretGeneration, &c.WebhookSecretGeneration)
	str(CtxRebalance, &c.Rebalance)
	integer(CtxLogRetentionDays, &c.LogRetentionDays)
	str(CtxLogLevel, &c.LogLevel)
	str(CtxAlarmEmail, &c.AlarmEmail)
	str(CtxAlarmTopicArn, &c.AlarmTopicArn)
	integer(CtxOldestPendingPodAlarm, &c.OldestPendingPodAlarmSeconds)
	str(CtxNodeRoleName, &c.NodeRoleName)
	str(CtxEKSAccess, &c.EKSAccess)
	str(CtxAssetDir, &c.AssetDir)
	boolean(CtxPlaceholderAssets, &c.PlaceholderAssets)

	var caFile string
	str(CtxWebhookCABundleFile, &caFile)
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("context %s: %w", CtxWebhookCABundleFile, err))
		} else {
			c.WebhookCABundle = string(b)
		}
	}
	if c.Account == "" {
		c.Account = os.Getenv("CDK_DEFAULT_ACCOUNT")
	}
	if c.Region == "" {
		c.Region = os.Getenv("CDK_DEFAULT_REGION")
	}
	return c, errors.Join(errs...)
}

var (
	// EKS: 1-100 characters, alphanumerics, hyphens and underscores, starting
	// with an alphanumeric.
	clusterNameRE = regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`)
	roleNameRE    = regexp.MustCompile(`^[\w+=,.@-]{1,64}$`)
	accountRE     = regexp.MustCompile(`^\d{12}$`)
	regionRE      = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-\d+$`)
	vpcRE         = regexp.MustCompile(`^vpc-[0-9a-f]{8,17}$`)
	subnetRE      = regexp.MustCompile(`^subnet-[0-9a-f]{8,17}$`)
	sgRE          = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)
	emailRE       = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s]+$`)
	snsArnRE      = regexp.MustCompile(`^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[\w-]{1,256}$`)
)

// retentionDays lists the values CloudWatch Logs accepts.
var retentionDays = []int{1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653}

// DefaultNodeRoleName is the node role name used when none is configured.
func DefaultNodeRoleName(clusterName string) string { return "nodewright-node-" + clusterName }

// Validate checks the configuration and fills derived defaults
// (NodeRoleName). Every problem is reported, one per line.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...interface{}) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.ClusterName == "" {
		bad("%s is required (cdk synth -c %s=<EKS cluster name>)", CtxClusterName, CtxClusterName)
	} else if !clusterNameRE.MatchString(c.ClusterName) {
		bad("%s %q is not a valid EKS cluster name", CtxClusterName, c.ClusterName)
	}
	if c.ConfigDir == "" {
		bad("%s is required (cdk synth -c %s=<directory of NodePool and EC2NodeClass YAML>)", CtxConfigDir, CtxConfigDir)
	}
	if c.Account != "" && !accountRE.MatchString(c.Account) {
		bad("%s %q is not a 12-digit AWS account ID", CtxAccount, c.Account)
	}
	if c.Region != "" && !regionRE.MatchString(c.Region) {
		bad("%s %q is not an AWS region name", CtxRegion, c.Region)
	}
	if c.VpcID != "" || len(c.SubnetIDs) > 0 {
		if !vpcRE.MatchString(c.VpcID) {
			bad("%s %q is not a VPC ID (vpc-...); it is required with %s", CtxVpcID, c.VpcID, CtxSubnetIDs)
		}
		if len(c.SubnetIDs) == 0 {
			bad("%s is required with %s: the functions' subnets (private, with a route to the cluster endpoint and AWS APIs)", CtxSubnetIDs, CtxVpcID)
		}
		for _, s := range c.SubnetIDs {
			if !subnetRE.MatchString(s) {
				bad("%s: %q is not a subnet ID (subnet-...)", CtxSubnetIDs, s)
			}
		}
	}
	for _, s := range c.SecurityGroupIDs {
		if !sgRE.MatchString(s) {
			bad("%s: %q is not a security group ID (sg-...)", CtxSecurityGroupIDs, s)
		}
	}
	if (len(c.SecurityGroupIDs) > 0 || c.ClusterSecurityGroupID != "") && c.VpcID == "" {
		bad("%s and %s only apply with %s", CtxSecurityGroupIDs, CtxClusterSecurityGroupID, CtxVpcID)
	}
	if c.ClusterSecurityGroupID != "" && !sgRE.MatchString(c.ClusterSecurityGroupID) {
		bad("%s %q is not a security group ID (sg-...)", CtxClusterSecurityGroupID, c.ClusterSecurityGroupID)
	}
	for _, r := range []struct {
		key string
		v   int
	}{{CtxProvisionerRate, c.ProvisionerRateMinutes}, {CtxLifecycleRate, c.LifecycleRateMinutes}, {CtxDisruptionRate, c.DisruptionRateMinutes}} {
		if r.v < 1 || r.v > 60 {
			bad("%s %d: want 1..60 minutes", r.key, r.v)
		}
	}
	if c.Rebalance != RebalanceIgnore && c.Rebalance != RebalanceReplace {
		bad("%s %q: want %q or %q", CtxRebalance, c.Rebalance, RebalanceIgnore, RebalanceReplace)
	}
	if i := sort.SearchInts(retentionDays, c.LogRetentionDays); i == len(retentionDays) || retentionDays[i] != c.LogRetentionDays {
		bad("%s %d: CloudWatch Logs accepts %v", CtxLogRetentionDays, c.LogRetentionDays, retentionDays)
	}
	switch c.LogLevel = strings.ToUpper(c.LogLevel); c.LogLevel {
	case "DEBUG", "INFO", "WARN", "ERROR":
	default:
		bad("%s %q: want DEBUG, INFO, WARN or ERROR", CtxLogLevel, c.LogLevel)
	}
	if c.AlarmEmail != "" && !emailRE.MatchString(c.AlarmEmail) {
		bad("%s %q is not an e-mail address", CtxAlarmEmail, c.AlarmEmail)
	}
	if c.AlarmTopicArn != "" && !snsArnRE.MatchString(c.AlarmTopicArn) {
		bad("%s %q is not an SNS topic ARN", CtxAlarmTopicArn, c.AlarmTopicArn)
	}
	if c.AlarmEmail != "" && c.AlarmTopicArn != "" {
		bad("set %s or %s, not both (subscribe the address to your topic instead)", CtxAlarmEmail, CtxAlarmTopicArn)
	}
	if c.OldestPendingPodAlarmSeconds < 60 {
		bad("%s %d: want at least 60 (the provisioner backstop runs every minute)", CtxOldestPendingPodAlarm, c.OldestPendingPodAlarmSeconds)
	}
	if c.WebhookSecretGeneration < 1 {
		bad("%s %d: want a positive number", CtxWebhookSecretGeneration, c.WebhookSecretGeneration)
	}
	if c.NodeRoleName == "" && c.ClusterName != "" {
		c.NodeRoleName = DefaultNodeRoleName(c.ClusterName)
		if !roleNameRE.MatchString(c.NodeRoleName) {
			bad("the default node role name %q is longer than IAM's 64 characters: set %s", c.NodeRoleName, CtxNodeRoleName)
		}
	} else if c.NodeRoleName != "" && !roleNameRE.MatchString(c.NodeRoleName) {
		bad("%s %q is not a valid IAM role name", CtxNodeRoleName, c.NodeRoleName)
	}
	if c.EKSAccess != AccessClusterAdmin && c.EKSAccess != AccessRBAC {
		bad("%s %q: want %q or %q", CtxEKSAccess, c.EKSAccess, AccessClusterAdmin, AccessRBAC)
	}
	if c.AssetDir == "" {
		bad("%s must not be empty", CtxAssetDir)
	}
	return errors.Join(errs...)
}

// ConfigFiles lists the YAML files in dir (not recursive), sorted, so a
// directory with no YAML is an error rather than an empty configuration.
func ConfigFiles(dir string) ([]string, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", CtxConfigDir, dir, err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s %s: not a directory", CtxConfigDir, dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", CtxConfigDir, dir, err)
	}
	var files []string
	for _, e := range entries {
		ext := strings.ToLower(filepath.Ext(e.Name()))
		if e.Type().IsRegular() && (ext == ".yaml" || ext == ".yml") {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s %s: no .yaml or .yml files", CtxConfigDir, dir)
	}
	sort.Strings(files)
	return files, nil
}
