package infra

import (
	"fmt"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambdaeventsources"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/settings"
)

// FunctionSizing is the memory and timeout of one function, with the reason.
type FunctionSizing struct {
	MemoryMB       int
	TimeoutSeconds int
	// ReservedConcurrency is both a cap and a floor (Lambda reserves it out
	// of the account's concurrency). 1 serializes disruption (the DynamoDB
	// lease is the correctness guarantee); the public webhook is capped so
	// a flood cannot starve the functions that matter (throttling it is
	// harmless under failurePolicy Ignore); interruption gets a floor so
	// spot warnings are handled even when the account is busy. 0 = unreserved.
	ReservedConcurrency int
	// SQSMaxConcurrency caps the concurrent invocations of the function's
	// SQS event source below its reserved concurrency (0 = the reserved
	// concurrency is the cap; see sqsMaxConcurrency).
	SQSMaxConcurrency int
	// InVPC places the function in the configured VPC (it talks to the
	// cluster endpoint).
	InVPC     bool
	Rationale string
}

// Sizing is each function's size and why. Memory and timeout are
// settings.DefaultSize (one place, shared with the cost model), from the
// passes measured at 2,000 nodes (infra/SCALE.md). Lambda gives CPU in
// proportion to memory (1 vCPU at 1,769 MB), so the solver's functions get
// memory for CPU as much as for heap.
var Sizing = map[string]FunctionSizing{
	"webhook": sized("webhook", FunctionSizing{ReservedConcurrency: 10, Rationale: "decodes one AdmissionReview and sends at most one (coalesced) SQS nudge; " +
		"the API server gives up after 2 s (timeoutSeconds) so a longer timeout buys nothing"}),
	"provisioner": sized("provisioner", FunctionSizing{SQSMaxConcurrency: 2, InVPC: true, Rationale: "cluster snapshot + solver: Karpenter's benchmark " +
		"places 5,000 pods in 12 s at 179 MB and 20,000 in 84 s at 552 MB on 2 cores; 2 GB (~1.2 vCPU) leaves heap for a 500-node snapshot " +
		"and 300 s covers a 10,000-pod pass including launches (also the provision queue's visibility timeout); at 2,000 nodes " +
		"placing 5,000 pending pods peaked at +1,273 MiB and took 40 s on 2 loaded cores (infra/SCALE.md)"}),
	"interruption": sized("interruption", FunctionSizing{ReservedConcurrency: 5, InVPC: true, Rationale: "up to 10 messages per batch, each a snapshot lookup, maybe a " +
		"replacement launch and a taint; spot warnings give 120 s, so a batch must finish well inside it (queue visibility 60 s)"}),
	"disruption": sized("disruption", FunctionSizing{ReservedConcurrency: 1, InVPC: true, Rationale: "simulates consolidation with the solver; " +
		"at 2,000 nodes / 40,000 pods a pass peaked at +912 MiB of heap and took ~3 min on 2 loaded cores (infra/SCALE.md); its searches stop at " +
		"1 min (multi-node) and 3 min (single-node), so 300 s covers them, the snapshot and the writes, under the 6-min lease (never renewed)"}),
	"lifecycle": sized("lifecycle", FunctionSizing{InVPC: true, Rationale: "registration/initialization/GC passes and one drain step per " +
		"work item (evictions are fire-and-requeue, never waited on); work queue visibility 180 s; " +
		"at 2,000 nodes a scheduled pass peaked at +250 MiB and took 11 s on 2 loaded cores (infra/SCALE.md)"}),
	"webhookregistrar": sized("webhookregistrar", FunctionSizing{InVPC: true, Rationale: "DescribeCluster, one secret read and a few API calls during deployments (on delete, one claim Query and a patch per Node)"}),
}

// sized is s with fn's default memory and timeout.
func sized(fn string, s FunctionSizing) FunctionSizing {
	d := settings.DefaultSize(fn)
	s.MemoryMB, s.TimeoutSeconds = d.MemoryMB, d.TimeoutSeconds
	return s
}

type logGroupRef = awslogs.LogGroup

var retentionEnum = map[int]awslogs.RetentionDays{
	1: awslogs.RetentionDays_ONE_DAY, 3: awslogs.RetentionDays_THREE_DAYS, 5: awslogs.RetentionDays_FIVE_DAYS,
	7: awslogs.RetentionDays_ONE_WEEK, 14: awslogs.RetentionDays_TWO_WEEKS, 30: awslogs.RetentionDays_ONE_MONTH,
	60: awslogs.RetentionDays_TWO_MONTHS, 90: awslogs.RetentionDays_THREE_MONTHS, 120: awslogs.RetentionDays_FOUR_MONTHS,
	150: awslogs.RetentionDays_FIVE_MONTHS, 180: awslogs.RetentionDays_SIX_MONTHS, 365: awslogs.RetentionDays_ONE_YEAR,
	400: awslogs.RetentionDays_THIRTEEN_MONTHS, 545: awslogs.RetentionDays_EIGHTEEN_MONTHS, 731: awslogs.RetentionDays_TWO_YEARS,
	1096: awslogs.RetentionDays_THREE_YEARS, 1827: awslogs.RetentionDays_FIVE_YEARS, 2192: awslogs.RetentionDays_SIX_YEARS,
	2557: awslogs.RetentionDays_SEVEN_YEARS, 2922: awslogs.RetentionDays_EIGHT_YEARS, 3288: awslogs.RetentionDays_NINE_YEARS,
	3653: awslogs.RetentionDays_TEN_YEARS,
}

var appLogLevel = map[string]awslambda.ApplicationLogLevel{
	"DEBUG": awslambda.ApplicationLogLevel_DEBUG, "INFO": awslambda.ApplicationLogLevel_INFO,
	"WARN": awslambda.ApplicationLogLevel_WARN, "ERROR": awslambda.ApplicationLogLevel_ERROR,
}

func (b *builder) roleFor(fn string) awsiam.Role {
	switch fn {
	case "webhook":
		return b.webhookRole
	case "webhookregistrar":
		return b.registrarRole
	default:
		return b.ControllerRole
	}
}

func (b *builder) functions(layerDir string) {
	st := b.scope
	b.layer = awslambda.NewLayerVersion(st, jsii.String("ConfigLayer"), &awslambda.LayerVersionProps{
		Code:                    awslambda.Code_FromAsset(jsii.String(layerDir), nil),
		CompatibleArchitectures: &[]awslambda.Architecture{awslambda.Architecture_ARM_64()},
		CompatibleRuntimes:      &[]awslambda.Runtime{awslambda.Runtime_PROVIDED_AL2023()},
		Description:             jsii.String("nodewright NodePools and EC2NodeClasses for " + b.cfg.ClusterName + " (validated at synth)"),
	})
	if b.vpc != nil {
		// Once for the shared roles (the Function construct would add the
		// managed policy per function: it cannot, the roles are passed
		// immutable so every grant is explicit below).
		for _, r := range []awsiam.Role{b.ControllerRole, b.registrarRole} {
			r.AddManagedPolicy(awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String("service-role/AWSLambdaVPCAccessExecutionRole")))
		}
	}
	b.logGroups = map[string]logGroupRef{}
	env := b.functionEnv()
	for _, name := range Functions {
		b.function(name, env)
	}
	b.eventSources()
}

// functionEnvs are the environment variables of the functions: common to
// all, and added for those running as the controller role.
type functionEnvs struct {
	common, controller map[string]*string
}

func (b *builder) functionEnv() functionEnvs {
	// Names from internal/settings, which every function reads.
	envs := functionEnvs{
		common: map[string]*string{
			settings.EnvClusterName:       jsii.String(b.cfg.ClusterName),
			settings.EnvLogLevel:          jsii.String(b.cfg.LogLevel),
			settings.EnvProvisionQueueURL: b.ProvisionQueue.QueueUrl(),
			settings.EnvMode:              jsii.String(b.cfg.Mode),
		},
		controller: map[string]*string{
			settings.EnvTableName:         b.Table.TableName(),
			settings.EnvOwner:             b.Table.TableArn(),
			settings.EnvConfigDir:         jsii.String(LayerConfigDir),
			settings.EnvInterruptionQueue: b.InterruptionQueue.QueueUrl(),
			settings.EnvWorkQueueURL:      b.WorkQueue.QueueUrl(),
			settings.EnvRebalance:         jsii.String(b.cfg.Rebalance),
			settings.EnvFeatureGates:      jsii.String(b.cfg.FeatureGates),
			settings.EnvNodeRoleName:      b.NodeRole.RoleName(),
			settings.EnvNodeRoleARN:       b.NodeRole.RoleArn(),
			settings.EnvInstanceProfile:   b.instanceProfile.InstanceProfileName(),
		},
	}
	b.cfg.addControllerSettings(envs.controller)
	return envs
}

// function creates one function and its log group.
func (b *builder) function(name string, envs functionEnvs) {
	st := b.scope
	size := b.cfg.Sized(name)
	role := b.roleFor(name)
	lg := awslogs.NewLogGroup(st, jsii.String(exportID(name)+"Logs"), &awslogs.LogGroupProps{
		Retention:     retentionEnum[b.cfg.LogRetentionDays],
		RemovalPolicy: awscdk.RemovalPolicy_DESTROY,
	})
	lg.GrantWrite(role)
	b.logGroups[name] = lg

	env := map[string]*string{}
	for k, v := range envs.common {
		env[k] = v
	}
	var layers []awslambda.ILayerVersion
	if role == b.ControllerRole {
		for k, v := range envs.controller {
			env[k] = v
		}
		layers = append(layers, b.layer)
	}
	props := &awslambda.FunctionProps{
		Description:  jsii.String(fmt.Sprintf("nodewright %s for EKS cluster %s", name, b.cfg.ClusterName)),
		Runtime:      awslambda.Runtime_PROVIDED_AL2023(),
		Architecture: awslambda.Architecture_ARM_64(),
		Handler:      jsii.String("bootstrap"),
		Code:         awslambda.Code_FromAsset(jsii.String(b.code[name]), nil),
		MemorySize:   jsii.Number(float64(size.MemoryMB)),
		Timeout:      awscdk.Duration_Seconds(jsii.Number(float64(size.TimeoutSeconds))),
		// Passed immutable: the Function construct would otherwise add
		// grants (and managed policies) of its own; every permission of
		// these roles is granted explicitly in this package.
		Role:                  role.WithoutPolicyUpdates(nil),
		Environment:           &env,
		LoggingFormat:         awslambda.LoggingFormat_JSON,
		ApplicationLogLevelV2: appLogLevel[b.cfg.LogLevel],
		SystemLogLevelV2:      awslambda.SystemLogLevel_WARN,
		LogGroup:              lg,
		Layers:                &layers,
	}
	if size.ReservedConcurrency > 0 {
		props.ReservedConcurrentExecutions = jsii.Number(float64(size.ReservedConcurrency))
	}
	if size.InVPC && b.vpc != nil {
		props.Vpc = b.vpc
		props.VpcSubnets = b.subnets
		props.SecurityGroups = &b.securityGroups
	}
	fn := awslambda.NewFunction(st, jsii.String(exportID(name)+"Function"), props)
	// The role and its policies (logs, SQS for the event sources, VPC
	// networking) must exist before the function and its mappings.
	fn.Node().AddDependency(role)
	b.Functions[name] = fn
}

// eventSources connects the provisioner, interruption, lifecycle and
// disruption functions to their queues.
func (b *builder) eventSources() {
	// Nudges: the event source's maximum concurrency, not reserved
	// concurrency 1, bounds provisioner runs from the queue. A reserved
	// concurrency of 1 made Lambda throttle nudges while the schedule's run
	// held the slot, and throttled messages used up their receives; the
	// DynamoDB lease serializes the runs that do start.
	b.sqsEventSource("provisioner", b.ProvisionQueue)
	b.sqsEventSource("interruption", b.InterruptionQueue)
	b.sqsEventSource("lifecycle", b.WorkQueue)
	b.disruptionWakeups()
}

// minSQSMaxConcurrency is the smallest MaximumConcurrency an SQS event
// source accepts (2 to 1,000: Lambda developer guide, "Configuring maximum
// concurrency for Amazon SQS event sources").
const minSQSMaxConcurrency = 2

// sqsEventSource connects fn to queue q in batches of 10 with partial batch
// responses (one bad message fails alone and reaches the DLQ after
// maxReceiveCount, the rest of the batch is deleted), at most
// sqsMaxConcurrency(fn) invocations at once.
func (b *builder) sqsEventSource(fn string, q awssqs.IQueue) {
	props := &awslambdaeventsources.SqsEventSourceProps{
		BatchSize:               jsii.Number(10),
		ReportBatchItemFailures: jsii.Bool(true),
	}
	if n := sqsMaxConcurrency(b.cfg.Sized(fn)); n > 0 {
		props.MaxConcurrency = jsii.Number(float64(n))
	}
	b.Functions[fn].AddEventSource(awslambdaeventsources.NewSqsEventSource(q, props))
}

// sqsMaxConcurrency is how many invocations a function's SQS event source
// may run at once (0: no limit of its own). Without one the event source
// scales its pollers past the function's reserved concurrency, Lambda
// throttles the invocations above it, and each throttled batch becomes
// visible again after the visibility timeout having used a receive: at
// interruption's 3 receives, a burst of spot warnings and state changes
// would reach the DLQ unhandled. So the event source never runs more than
// the reserved concurrency, and never more than the function's own
// SQSMaxConcurrency, but at least Lambda's minimum of 2. That minimum is
// above disruption's reserved concurrency of 1: a second wake-up batch can
// still be throttled, which the disruption queue's extra receives absorb
// (disruptionQueue). Unreserved functions (lifecycle) are bounded only by
// the account's concurrency, which throttles no sooner than it would
// without the event source's limit.
func sqsMaxConcurrency(s FunctionSizing) int {
	n := s.SQSMaxConcurrency
	if r := s.ReservedConcurrency; r > 0 && (n == 0 || n > r) {
		n = r
	}
	if n == 0 {
		return 0
	}
	return max(n, minSQSMaxConcurrency)
}

// disruptionWakeups lets the disruption function wake itself before its
// next tick: it knows its queue and the schedule's period (to tell whether
// the tick comes soon enough), and the queue invokes it. Only this function
// gets the variables; the grants are the controller role's (iam.go).
func (b *builder) disruptionWakeups() {
	fn := b.Functions["disruption"]
	fn.AddEnvironment(jsii.String(settings.EnvDisruptionQueueURL), b.DisruptionQueue.QueueUrl(), nil)
	fn.AddEnvironment(jsii.String(settings.EnvDisruptionSchedule), jsii.String(fmt.Sprintf("%dm", b.cfg.DisruptionRateMinutes)), nil)
	b.sqsEventSource("disruption", b.DisruptionQueue)
}
