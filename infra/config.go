// Package infra is nodewright's CDK app: one stack per EKS cluster with the
// Lambda functions, their queues, schedules, table, IAM, EKS access entries,
// the webhook registration and the alarms (NewStack), built by Build, which
// infra/nodewright's construct also uses to place them in a user's stack.
// See README.md in this folder.
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

	"github.com/nodewright/nodewright/internal/settings"
)

// Rebalance policies for EC2 rebalance recommendations.
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
	// WebhookSecretRotationDays is how often the registrar rotates the
	// webhook's secret (0: never). The secret rides in the webhook URL,
	// which the API server writes into its error messages (EKS
	// control-plane logs); rotation bounds what a leaked value is worth.
	WebhookSecretRotationDays int

	// Rebalance is what to do on EC2 rebalance recommendations.
	Rebalance string
	// FeatureGates are Karpenter-style gates ("SpotToSpotConsolidation=true"),
	// passed to the controller functions as settings.EnvFeatureGates.
	FeatureGates string
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

	// NodeRoleName is the IAM role the stack creates for nodes, used by the
	// EC2NodeClasses that name it (or its instance profile) or no role. Other
	// roles the classes name get an instance profile, an access entry and
	// iam:PassRole from the stack (see noderoles.go).
	NodeRoleName string
	// ExistingAccessEntries are roles (names or ARNs) of EC2NodeClasses that
	// already have an EKS access entry: the stack creates none for them.
	ExistingAccessEntries []string
	// InstanceProfileRoles maps each existing instance profile an
	// EC2NodeClass names to the role it holds (name or ARN), the role the
	// functions must be allowed to pass.
	InstanceProfileRoles map[string]string
	// EKSAccess is AccessClusterAdmin or AccessRBAC.
	EKSAccess string

	// Mode is settings.ModeNormal or settings.ModeShadow: in shadow mode the
	// functions decide and record but act on nothing, the controller role
	// holds read rights only (no EC2 write, no iam:PassRole, a read-only
	// access entry), no webhook or RBAC is registered in the cluster and the
	// provisioner runs on its schedule.
	Mode string

	// AssetDir holds <function>/bootstrap as built by `make build`.
	AssetDir string
	// PlaceholderAssets synthesizes with placeholder function code when the
	// build output is missing (tests, CI synth); never deploy it.
	PlaceholderAssets bool

	// FunctionSizes overrides functions' "MB:seconds" (see Sized).
	FunctionSizes map[string]string
	// ReservedConcurrency overrides functions' reserved concurrency (see
	// Sized), for accounts whose concurrency quota cannot hold the
	// defaults' 16 above Lambda's unreserved floor of 100.
	ReservedConcurrency map[string]string
	// ControllerSettings are Karpenter's controller settings by their
	// context names (controllersettings.go).
	ControllerSettings map[string]string
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
		WebhookSecretRotationDays:    7,
		Rebalance:                    RebalanceIgnore,
		LogRetentionDays:             30,
		LogLevel:                     "INFO",
		OldestPendingPodAlarmSeconds: 300,
		EKSAccess:                    AccessRBAC,
		Mode:                         settings.ModeNormal,
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
	CtxWebhookSecretRotation   = "webhookSecretRotationDays"
	CtxRebalance               = "rebalance"
	CtxFeatureGates            = "featureGates"
	CtxLogRetentionDays        = "logRetentionDays"
	CtxLogLevel                = "logLevel"
	CtxAlarmEmail              = "alarmEmail"
	CtxAlarmTopicArn           = "alarmTopicArn"
	CtxOldestPendingPodAlarm   = "oldestPendingPodAlarmSeconds"
	CtxNodeRoleName            = "nodeRoleName"
	CtxExistingAccessEntries   = "existingAccessEntries"
	CtxInstanceProfileRoles    = "instanceProfileRoles"
	CtxEKSAccess               = "eksAccess"
	CtxMode                    = "mode"
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
	r := &contextReader{get: get}
	r.str(CtxClusterName, &c.ClusterName)
	r.str(CtxAccount, &c.Account)
	r.str(CtxRegion, &c.Region)
	r.str(CtxConfigDir, &c.ConfigDir)
	r.str(CtxVpcID, &c.VpcID)
	r.list(CtxSubnetIDs, &c.SubnetIDs)
	r.list(CtxSecurityGroupIDs, &c.SecurityGroupIDs)
	r.str(CtxClusterSecurityGroupID, &c.ClusterSecurityGroupID)
	r.integer(CtxProvisionerRate, &c.ProvisionerRateMinutes)
	r.integer(CtxLifecycleRate, &c.LifecycleRateMinutes)
	r.integer(CtxDisruptionRate, &c.DisruptionRateMinutes)
	r.boolean(CtxWebhook, &c.Webhook)
	r.integer(CtxWebhookSecretGeneration, &c.WebhookSecretGeneration)
	r.integer(CtxWebhookSecretRotation, &c.WebhookSecretRotationDays)
	r.str(CtxRebalance, &c.Rebalance)
	r.str(CtxFeatureGates, &c.FeatureGates)
	r.integer(CtxLogRetentionDays, &c.LogRetentionDays)
	r.str(CtxLogLevel, &c.LogLevel)
	r.str(CtxAlarmEmail, &c.AlarmEmail)
	r.str(CtxAlarmTopicArn, &c.AlarmTopicArn)
	r.integer(CtxOldestPendingPodAlarm, &c.OldestPendingPodAlarmSeconds)
	r.str(CtxNodeRoleName, &c.NodeRoleName)
	r.list(CtxExistingAccessEntries, &c.ExistingAccessEntries)
	r.pairs(CtxInstanceProfileRoles, &c.InstanceProfileRoles)
	r.str(CtxEKSAccess, &c.EKSAccess)
	r.str(CtxMode, &c.Mode)
	r.str(CtxAssetDir, &c.AssetDir)
	r.boolean(CtxPlaceholderAssets, &c.PlaceholderAssets)
	r.pairs(CtxFunctionSizes, &c.FunctionSizes)
	r.pairs(CtxReservedConcurrency, &c.ReservedConcurrency)
	r.controllerSettings(&c.ControllerSettings)

	var caFile string
	r.str(CtxWebhookCABundleFile, &caFile)
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			r.errs = append(r.errs, fmt.Errorf("context %s: %w", CtxWebhookCABundleFile, err))
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
	return c, errors.Join(r.errs...)
}

// contextReader reads typed context values, collecting every problem so
// FromContext reports them all at once. A nil value (unset) leaves the
// destination alone.
type contextReader struct {
	get  ContextGetter
	errs []error
}

func (r *contextReader) fail(format string, args ...interface{}) {
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

func (r *contextReader) str(key string, dst *string) {
	v := r.get(key)
	if v == nil {
		return
	}
	switch x := v.(type) {
	case string:
		*dst = strings.TrimSpace(x)
	case float64:
		*dst = strconv.FormatFloat(x, 'f', -1, 64)
	default:
		r.fail("context %s: want a string, got %T", key, v)
	}
}

func (r *contextReader) integer(key string, dst *int) {
	readScalar(r, key, dst, "a whole number", strconv.Atoi, func(v any) (int, bool) {
		x, ok := v.(float64)
		return int(x), ok && x == float64(int(x))
	})
}

func (r *contextReader) boolean(key string, dst *bool) {
	readScalar(r, key, dst, "true or false", strconv.ParseBool, func(v any) (bool, bool) {
		x, ok := v.(bool)
		return x, ok
	})
}

// readScalar reads a value that cdk.json gives as JSON (native says whether
// it has the right type and value) and -c gives as a string (parse).
func readScalar[T any](r *contextReader, key string, dst *T, what string, parse func(string) (T, error), native func(any) (T, bool)) {
	v := r.get(key)
	if v == nil {
		return
	}
	if x, ok := v.(string); ok {
		parseContextString(r, key, x, parse, what, dst)
		return
	}
	x, ok := native(v)
	if !ok {
		r.fail("context %s: want %s, got %v (%T)", key, what, v, v)
		return
	}
	*dst = x
}

// parseContextString parses a value given as a string (-c key=value) into
// dst; what names the expected kind in the error.
func parseContextString[T any](r *contextReader, key, x string, parse func(string) (T, error), what string, dst *T) {
	v, err := parse(strings.TrimSpace(x))
	if err != nil {
		r.fail("context %s: %q is not %s", key, x, what)
		return
	}
	*dst = v
}

// list reads a JSON list from cdk.json, or a JSON list or comma-separated
// string from -c; blank items are dropped.
func (r *contextReader) list(key string, dst *[]string) {
	v := r.get(key)
	if v == nil {
		return
	}
	items, ok := r.listItems(key, v)
	if !ok {
		return
	}
	*dst = nil
	for _, it := range items {
		if it = strings.TrimSpace(it); it != "" {
			*dst = append(*dst, it)
		}
	}
}

func (r *contextReader) listItems(key string, v interface{}) ([]string, bool) {
	var items []string
	switch x := v.(type) {
	case []interface{}:
		for _, it := range x {
			s, ok := it.(string)
			if !ok {
				r.fail("context %s: want a list of strings, found %T", key, it)
				return nil, false
			}
			items = append(items, s)
		}
	case string:
		x = strings.TrimSpace(x)
		if strings.HasPrefix(x, "[") {
			if err := json.Unmarshal([]byte(x), &items); err != nil {
				r.errs = append(r.errs, fmt.Errorf("context %s: %w", key, err))
				return nil, false
			}
		} else {
			items = strings.Split(x, ",")
		}
	default:
		r.fail("context %s: want a list or comma-separated string, got %T", key, v)
		return nil, false
	}
	return items, true
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
	var p problems
	c.validateTarget(&p)
	c.validateNetwork(&p)
	c.validateSchedulesAndLogs(&p)
	c.validateAlarms(&p)
	c.validateRoles(&p)
	c.validateNodeRoleContext(&p)
	c.validateFunctionSizes(&p)
	c.validateReservedConcurrency(&p)
	c.validateControllerSettings(&p)
	return errors.Join(p...)
}

// problems collects Validate's findings in the order they are checked.
type problems []error

func (p *problems) bad(format string, args ...interface{}) {
	*p = append(*p, fmt.Errorf(format, args...))
}

// validateTarget checks what the stack is for: cluster, configuration and
// environment.
func (c *Config) validateTarget(p *problems) {
	if c.ClusterName == "" {
		p.bad("%s is required (cdk synth -c %s=<EKS cluster name>)", CtxClusterName, CtxClusterName)
	} else if !clusterNameRE.MatchString(c.ClusterName) {
		p.bad("%s %q is not a valid EKS cluster name", CtxClusterName, c.ClusterName)
	}
	if c.ConfigDir == "" {
		p.bad("%s is required (cdk synth -c %s=<directory of NodePool and EC2NodeClass YAML>)", CtxConfigDir, CtxConfigDir)
	}
	if c.Account != "" && !accountRE.MatchString(c.Account) {
		p.bad("%s %q is not a 12-digit AWS account ID", CtxAccount, c.Account)
	}
	if c.Region != "" && !regionRE.MatchString(c.Region) {
		p.bad("%s %q is not an AWS region name", CtxRegion, c.Region)
	}
}

func (c *Config) validateNetwork(p *problems) {
	if c.VpcID != "" || len(c.SubnetIDs) > 0 {
		if !vpcRE.MatchString(c.VpcID) {
			p.bad("%s %q is not a VPC ID (vpc-...); it is required with %s", CtxVpcID, c.VpcID, CtxSubnetIDs)
		}
		if len(c.SubnetIDs) == 0 {
			p.bad("%s is required with %s: the functions' subnets (private, with a route to the cluster endpoint and AWS APIs)", CtxSubnetIDs, CtxVpcID)
		}
		for _, s := range c.SubnetIDs {
			if !subnetRE.MatchString(s) {
				p.bad("%s: %q is not a subnet ID (subnet-...)", CtxSubnetIDs, s)
			}
		}
	}
	for _, s := range c.SecurityGroupIDs {
		if !sgRE.MatchString(s) {
			p.bad("%s: %q is not a security group ID (sg-...)", CtxSecurityGroupIDs, s)
		}
	}
	if (len(c.SecurityGroupIDs) > 0 || c.ClusterSecurityGroupID != "") && c.VpcID == "" {
		p.bad("%s and %s only apply with %s", CtxSecurityGroupIDs, CtxClusterSecurityGroupID, CtxVpcID)
	}
	if c.ClusterSecurityGroupID != "" && !sgRE.MatchString(c.ClusterSecurityGroupID) {
		p.bad("%s %q is not a security group ID (sg-...)", CtxClusterSecurityGroupID, c.ClusterSecurityGroupID)
	}
}

func (c *Config) validateSchedulesAndLogs(p *problems) {
	for _, r := range []struct {
		key string
		v   int
	}{{CtxProvisionerRate, c.ProvisionerRateMinutes}, {CtxLifecycleRate, c.LifecycleRateMinutes}, {CtxDisruptionRate, c.DisruptionRateMinutes}} {
		if r.v < 1 || r.v > 60 {
			p.bad("%s %d: want 1..60 minutes", r.key, r.v)
		}
	}
	if c.Rebalance != RebalanceIgnore && c.Rebalance != RebalanceReplace {
		p.bad("%s %q: want %q or %q", CtxRebalance, c.Rebalance, RebalanceIgnore, RebalanceReplace)
	}
	if _, err := settings.ParseFeatureGates(c.FeatureGates); err != nil {
		p.bad("%s: %v", CtxFeatureGates, err)
	}
	if i := sort.SearchInts(retentionDays, c.LogRetentionDays); i == len(retentionDays) || retentionDays[i] != c.LogRetentionDays {
		p.bad("%s %d: CloudWatch Logs accepts %v", CtxLogRetentionDays, c.LogRetentionDays, retentionDays)
	}
	switch c.LogLevel = strings.ToUpper(c.LogLevel); c.LogLevel {
	case "DEBUG", "INFO", "WARN", "ERROR":
	default:
		p.bad("%s %q: want DEBUG, INFO, WARN or ERROR", CtxLogLevel, c.LogLevel)
	}
}

func (c *Config) validateAlarms(p *problems) {
	if c.AlarmEmail != "" && !emailRE.MatchString(c.AlarmEmail) {
		p.bad("%s %q is not an e-mail address", CtxAlarmEmail, c.AlarmEmail)
	}
	if c.AlarmTopicArn != "" && !snsArnRE.MatchString(c.AlarmTopicArn) {
		p.bad("%s %q is not an SNS topic ARN", CtxAlarmTopicArn, c.AlarmTopicArn)
	}
	if c.AlarmEmail != "" && c.AlarmTopicArn != "" {
		p.bad("set %s or %s, not both (subscribe the address to your topic instead)", CtxAlarmEmail, CtxAlarmTopicArn)
	}
	if c.OldestPendingPodAlarmSeconds < 60 {
		p.bad("%s %d: want at least 60 (the provisioner backstop runs every minute)", CtxOldestPendingPodAlarm, c.OldestPendingPodAlarmSeconds)
	}
}

// validateRoles checks the webhook secret generation, the node role (and
// fills its default name), EKS access and the asset directory.
func (c *Config) validateRoles(p *problems) {
	if c.WebhookSecretGeneration < 1 {
		p.bad("%s %d: want a positive number", CtxWebhookSecretGeneration, c.WebhookSecretGeneration)
	}
	if c.WebhookSecretRotationDays < 0 || c.WebhookSecretRotationDays > 365 {
		p.bad("%s %d: want 0 (never) to 365 days", CtxWebhookSecretRotation, c.WebhookSecretRotationDays)
	}
	if c.NodeRoleName == "" && c.ClusterName != "" {
		c.NodeRoleName = DefaultNodeRoleName(c.ClusterName)
		if !roleNameRE.MatchString(c.NodeRoleName) {
			p.bad("the default node role name %q is longer than IAM's 64 characters: set %s", c.NodeRoleName, CtxNodeRoleName)
		}
	} else if c.NodeRoleName != "" && !roleNameRE.MatchString(c.NodeRoleName) {
		p.bad("%s %q is not a valid IAM role name", CtxNodeRoleName, c.NodeRoleName)
	}
	if c.EKSAccess != AccessClusterAdmin && c.EKSAccess != AccessRBAC {
		p.bad("%s %q: want %q or %q", CtxEKSAccess, c.EKSAccess, AccessClusterAdmin, AccessRBAC)
	}
	if c.AssetDir == "" {
		p.bad("%s must not be empty", CtxAssetDir)
	}
	switch c.Mode {
	case settings.ModeNormal:
	case settings.ModeShadow:
		// Registering the webhook writes to the cluster; the provisioner's
		// schedule finds the pending pods instead.
		c.Webhook = false
	default:
		p.bad("%s %q: want %q or %q", CtxMode, c.Mode, settings.ModeNormal, settings.ModeShadow)
	}
}

// Shadow reports whether the stack deploys nodewright in shadow mode.
func (c *Config) Shadow() bool { return c.Mode == settings.ModeShadow }

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
