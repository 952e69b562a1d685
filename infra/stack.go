package infra

import (
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsdynamodb"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsec2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/store"
)

// amazonRootCAs are Amazon Trust Services' root certificates (public, from
// the Debian ca-certificates bundle); every Lambda function URL presents a
// chain ending in one of them.
//
//go:embed amazon-root-cas.pem
var amazonRootCAs string

// WebhookPathPrefix is the function URL path the API server calls; the
// shared secret is the segment after it (webhook configurations allow no
// headers and no query string).
const WebhookPathPrefix = "/admit/"

// MetricsNamespace is the CloudWatch namespace of the functions' EMF metrics.
const MetricsNamespace = metrics.Namespace

// StackInput is everything NewStack needs.
type StackInput struct {
	Config Config
	// Loader validates the YAML in Config.ConfigDir (apis.Load behind it).
	Loader ConfigLoader
	// StagingDir receives generated asset directories (config layer,
	// placeholders). It must exist until the app has synthesized.
	StagingDir string
	// StackProps are passed through (description, synthesizer, tags...);
	// Env is set from Config.Account/Region when empty.
	StackProps *awscdk.StackProps
}

// Stack is the nodewright stack of one cluster: a stack holding nothing but
// nodewright's resources, added directly under it by Build.
type Stack struct {
	awscdk.Stack
	*Resources
}

// StackName is the default stack name for a cluster.
func StackName(clusterName string) string { return "nodewright-" + clusterName }

// NewStack validates the input (configuration first, then the user's YAML)
// and only then builds the stack, so a bad file never leaves half a stack.
// The resources are the stack's direct children, as they always were: their
// logical IDs, and so what CloudFormation keeps on an update, must not
// change (testdata/logical-ids.txt).
func NewStack(scope constructs.Construct, id string, in StackInput) (*Stack, error) {
	p, err := prepare(Input{Config: in.Config, Loader: in.Loader, StagingDir: in.StagingDir})
	if err != nil {
		return nil, err
	}
	st := awscdk.NewStack(scope, jsii.String(id), stackProps(p.cfg, in.StackProps))
	return &Stack{Stack: st, Resources: p.build(st)}, nil
}

// stackProps are the given props with the environment of cfg and a
// description naming the cluster when they have none.
func stackProps(cfg Config, given *awscdk.StackProps) *awscdk.StackProps {
	props := awscdk.StackProps{}
	if given != nil {
		props = *given
	}
	if props.Env == nil && (cfg.Account != "" || cfg.Region != "") {
		env := &awscdk.Environment{}
		if cfg.Account != "" {
			env.Account = jsii.String(cfg.Account)
		}
		if cfg.Region != "" {
			env.Region = jsii.String(cfg.Region)
		}
		props.Env = env
	}
	if props.Description == nil {
		props.Description = jsii.String(fmt.Sprintf("nodewright: serverless Karpenter-compatible node autoscaling for EKS cluster %s", cfg.ClusterName))
	}
	return &props
}

// Resources are the constructs of one cluster's nodewright, for the code
// that placed them to wire to its own (alarm actions, more grants...).
type Resources struct {
	Config     Config
	NodeConfig *NodeConfig
	// NodeRoles are the roles the EC2NodeClasses launch with (noderoles.go).
	NodeRoles []*NodeRole

	Table             awsdynamodb.Table
	InterruptionQueue awssqs.Queue
	InterruptionDLQ   awssqs.Queue
	ProvisionQueue    awssqs.Queue
	ProvisionDLQ      awssqs.Queue
	WorkQueue         awssqs.Queue
	WorkDLQ           awssqs.Queue
	DisruptionQueue   awssqs.Queue
	DisruptionDLQ     awssqs.Queue
	NodeRole          awsiam.Role
	ControllerRole    awsiam.Role
	Functions         map[string]awslambda.Function
}

// builder carries the constructs between the steps of build. Resources are
// created under scope; stack is the stack holding it (region, ARNs, name).
type builder struct {
	*Resources
	scope constructs.Construct
	stack awscdk.Stack
	cfg   Config
	code  map[string]string

	clusterArn       *string
	logGroups        map[string]logGroupRef
	layer            awslambda.LayerVersion
	vpc              awsec2.IVpc
	subnets          *awsec2.SubnetSelection
	securityGroups   []awsec2.ISecurityGroup
	instanceProfile  awsiam.InstanceProfile
	webhookRole      awsiam.Role
	registrarRole    awsiam.Role
	registrarAccess  awseks.CfnAccessEntry
	controllerAccess awseks.CfnAccessEntry
	webhookSecret    awssecretsmanager.Secret
	functionURL      awslambda.FunctionUrl
	// registrarTrust are the properties of every custom resource the
	// registrar serves, by resource type (see trustRegistrar).
	registrarTrust map[string]map[string]interface{}
}

func (b *builder) sub(format string) *string { return awscdk.Fn_Sub(jsii.String(format), nil) }

func (b *builder) table() {
	str := awsdynamodb.AttributeType_STRING
	props := &awsdynamodb.TableProps{
		PartitionKey: &awsdynamodb.Attribute{Name: jsii.String(store.Schema.TableKey.PartitionKey), Type: str},
		BillingMode:  awsdynamodb.BillingMode_PAY_PER_REQUEST,
		PointInTimeRecoverySpecification: &awsdynamodb.PointInTimeRecoverySpecification{
			PointInTimeRecoveryEnabled: jsii.Bool(true),
		},
		TimeToLiveAttribute: jsii.String(store.Schema.TTLAttribute),
		Encryption:          awsdynamodb.TableEncryption_AWS_MANAGED,
		DeletionProtection:  jsii.Bool(true),
		// NodeClaims are the only record of which instances nodewright owns:
		// never delete them with the stack.
		RemovalPolicy: awscdk.RemovalPolicy_RETAIN,
	}
	if sk := store.Schema.TableKey.SortKey; sk != "" {
		props.SortKey = &awsdynamodb.Attribute{Name: jsii.String(sk), Type: str}
	}
	b.Table = awsdynamodb.NewTable(b.scope, jsii.String("Table"), props)
	for _, g := range store.Schema.GSIs {
		gp := &awsdynamodb.GlobalSecondaryIndexProps{
			IndexName:      jsii.String(g.Name),
			PartitionKey:   &awsdynamodb.Attribute{Name: jsii.String(g.PartitionKey), Type: str},
			ProjectionType: awsdynamodb.ProjectionType_ALL,
		}
		if g.SortKey != "" {
			gp.SortKey = &awsdynamodb.Attribute{Name: jsii.String(g.SortKey), Type: str}
		}
		b.Table.AddGlobalSecondaryIndex(gp)
	}
}

// Queue timing. The interruption queue keeps messages 300 s as Karpenter's
// does: a spot warning is worth acting on for two minutes, a stale one only
// causes churn. Its visibility timeout (60 s) covers the function's 40 s
// timeout with margin while letting maxReceiveCount=3 receives happen well
// inside the retention period, so a poison message reaches the DLQ instead of
// silently expiring (AWS's 6x-timeout advice would exceed the retention).
const (
	interruptionRetentionSeconds  = 300
	interruptionVisibilitySeconds = 60
	interruptionMaxReceives       = 3
	provisionMaxReceives          = 3
	workVisibilitySeconds         = 180
	workMaxReceives               = 10
	disruptionMaxReceives         = 5
	dlqRetentionDays              = 14
)

func (b *builder) queues() {
	b.InterruptionDLQ = b.dlq("InterruptionDLQ")
	// SSE-SQS rather than KMS: EventBridge can deliver to it without a key
	// policy, and the events carry only instance IDs.
	b.InterruptionQueue = b.queue("InterruptionQueue", &awssqs.QueueProps{
		RetentionPeriod:   awscdk.Duration_Seconds(jsii.Number(interruptionRetentionSeconds)),
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(interruptionVisibilitySeconds)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: b.InterruptionDLQ, MaxReceiveCount: jsii.Number(interruptionMaxReceives)},
	})
	b.ProvisionDLQ = b.dlq("ProvisionDLQ")
	// The provision queue carries the webhook's coalesced nudges to the
	// provisioner. Visibility must cover the provisioner's timeout (an SQS
	// event source requires it), and retention must outlast every receive a
	// message is allowed (visibility x maxReceiveCount) with room to spare:
	// with retention equal to visibility a failed nudge expired before its
	// redelivery and the DLQ could never fire.
	provisionVisibility := b.cfg.Sized("provisioner").TimeoutSeconds
	b.ProvisionQueue = b.queue("ProvisionQueue", &awssqs.QueueProps{
		RetentionPeriod:   awscdk.Duration_Seconds(jsii.Number(float64(provisionVisibility * (provisionMaxReceives + 1)))),
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(float64(provisionVisibility))),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: b.ProvisionDLQ, MaxReceiveCount: jsii.Number(provisionMaxReceives)},
	})
	b.WorkDLQ = b.dlq("WorkDLQ")
	// The work queue carries the controllers' delayed requeues (SendMessage
	// with DelaySeconds, like requeueAfter); a step that keeps failing is
	// retried workMaxReceives times, then parked in the DLQ and alarmed on.
	b.WorkQueue = b.queue("WorkQueue", &awssqs.QueueProps{
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(workVisibilitySeconds)),
		RetentionPeriod:   awscdk.Duration_Days(jsii.Number(4)),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: b.WorkDLQ, MaxReceiveCount: jsii.Number(workMaxReceives)},
	})
	b.disruptionQueue()
}

// disruptionQueue carries the disruption function's wake-ups to itself:
// a pass whose next candidate becomes eligible (or whose decision is due for
// validation) before the next tick sends one message with that delay
// (internal/disruption/wakeup.go). Visibility covers the function's timeout
// (an SQS event source requires it); the function's reserved concurrency of
// 1 throttles a wake-up arriving during a pass, and each throttle uses a
// receive, hence more receives than the provision queue allows; retention
// covers the longest delay SQS holds a message back plus every receive.
func (b *builder) disruptionQueue() {
	visibility := b.cfg.Sized("disruption").TimeoutSeconds
	b.DisruptionDLQ = b.dlq("DisruptionDLQ")
	b.DisruptionQueue = b.queue("DisruptionQueue", &awssqs.QueueProps{
		RetentionPeriod:   awscdk.Duration_Seconds(jsii.Number(float64(maxSQSDelaySeconds + visibility*(disruptionMaxReceives+1)))),
		VisibilityTimeout: awscdk.Duration_Seconds(jsii.Number(float64(visibility))),
		DeadLetterQueue:   &awssqs.DeadLetterQueue{Queue: b.DisruptionDLQ, MaxReceiveCount: jsii.Number(disruptionMaxReceives)},
	})
}

// maxSQSDelaySeconds is the longest DelaySeconds SQS accepts.
const maxSQSDelaySeconds = 900

// queue creates a queue with SQS-managed encryption and TLS enforced, as
// every queue of the stack is.
func (b *builder) queue(id string, props *awssqs.QueueProps) awssqs.Queue {
	props.Encryption = awssqs.QueueEncryption_SQS_MANAGED
	props.EnforceSSL = jsii.Bool(true)
	return awssqs.NewQueue(b.scope, jsii.String(id), props)
}

// dlq creates a dead-letter queue, keeping messages dlqRetentionDays.
func (b *builder) dlq(id string) awssqs.Queue {
	return b.queue(id, &awssqs.QueueProps{RetentionPeriod: awscdk.Duration_Days(jsii.Number(dlqRetentionDays))})
}

func lambdaPrincipal() awsiam.IPrincipal {
	return awsiam.NewServicePrincipal(jsii.String("lambda.amazonaws.com"), nil)
}

// sanitizedName turns a cluster name into a DNS-1123 label fragment.
var nonDNS = regexp.MustCompile(`[^a-z0-9-]+`)

func dnsName(prefix, name string) string {
	n := strings.Trim(nonDNS.ReplaceAllString(strings.ToLower(name), "-"), "-")
	return prefix + n
}

func (b *builder) network() {
	if b.cfg.VpcID == "" {
		return
	}
	st := b.scope
	b.vpc = awsec2.Vpc_FromVpcAttributes(st, jsii.String("Vpc"), &awsec2.VpcAttributes{
		VpcId:             jsii.String(b.cfg.VpcID),
		AvailabilityZones: b.stack.AvailabilityZones(),
	})
	var subnets []awsec2.ISubnet
	for i, id := range b.cfg.SubnetIDs {
		subnets = append(subnets, awsec2.Subnet_FromSubnetId(st, jsii.String("Subnet"+strconv.Itoa(i)), jsii.String(id)))
	}
	b.subnets = &awsec2.SubnetSelection{Subnets: &subnets}
	if len(b.cfg.SecurityGroupIDs) > 0 {
		for i, id := range b.cfg.SecurityGroupIDs {
			b.securityGroups = append(b.securityGroups, awsec2.SecurityGroup_FromSecurityGroupId(st, jsii.String("SecurityGroup"+strconv.Itoa(i)), jsii.String(id), nil))
		}
		return
	}
	sg := awsec2.NewSecurityGroup(st, jsii.String("FunctionsSecurityGroup"), &awsec2.SecurityGroupProps{
		Vpc:              b.vpc,
		AllowAllOutbound: jsii.Bool(true),
		Description:      jsii.String("nodewright functions: egress to the EKS endpoint and AWS APIs; no ingress"),
	})
	b.securityGroups = []awsec2.ISecurityGroup{sg}
	if b.cfg.ClusterSecurityGroupID != "" {
		awsec2.NewCfnSecurityGroupIngress(st, jsii.String("ClusterEndpointFromFunctions"), &awsec2.CfnSecurityGroupIngressProps{
			GroupId:               jsii.String(b.cfg.ClusterSecurityGroupID),
			IpProtocol:            jsii.String("tcp"),
			FromPort:              jsii.Number(443),
			ToPort:                jsii.Number(443),
			SourceSecurityGroupId: sg.SecurityGroupId(),
			Description:           jsii.String("nodewright functions to the Kubernetes API"),
		})
	}
}

func (b *builder) interruptionRules() {
	st := b.scope
	rules := []struct {
		id      string
		pattern *awsevents.EventPattern
	}{
		{"SpotInterruptionRule", &awsevents.EventPattern{
			Source: jsii.Strings("aws.ec2"), DetailType: jsii.Strings("EC2 Spot Instance Interruption Warning"),
		}},
		{"RebalanceRule", &awsevents.EventPattern{
			Source: jsii.Strings("aws.ec2"), DetailType: jsii.Strings("EC2 Instance Rebalance Recommendation"),
		}},
		{"InstanceStateChangeRule", &awsevents.EventPattern{
			Source: jsii.Strings("aws.ec2"), DetailType: jsii.Strings("EC2 Instance State-change Notification"),
			Detail: &map[string]interface{}{"state": []string{"stopping", "stopped", "shutting-down", "terminated"}},
		}},
		// Karpenter-AWS v1.14.1 parses this detail-type and drains the node
		// (interruption/messages/capacityreservationinterruption); EC2 sends
		// it two minutes before it terminates an instance of an
		// interruptible Capacity Reservation (EC2 User Guide, "Monitor
		// interruptible Capacity Reservations with EventBridge").
		{"CapacityReservationInterruptionRule", &awsevents.EventPattern{
			Source: jsii.Strings("aws.ec2"), DetailType: jsii.Strings("EC2 Capacity Reservation Instance Interruption Warning"),
		}},
		{"ScheduledChangeRule", &awsevents.EventPattern{
			Source: jsii.Strings("aws.health"), DetailType: jsii.Strings("AWS Health Event"),
			Detail: &map[string]interface{}{"service": []string{"EC2"}, "eventTypeCategory": []string{"scheduledChange"}},
		}},
	}
	for _, r := range rules {
		// The SqsQueue target adds a queue policy statement for exactly this
		// rule (events.amazonaws.com, aws:SourceArn = the rule's ARN).
		awsevents.NewRule(st, jsii.String(r.id), &awsevents.RuleProps{
			Description:  jsii.String("nodewright " + b.cfg.ClusterName + ": " + *(*r.pattern.DetailType)[0] + " to the interruption queue"),
			EventPattern: r.pattern,
			Targets:      &[]awsevents.IRuleTarget{awseventstargets.NewSqsQueue(b.InterruptionQueue, nil)},
		})
	}
}

// scheduledEventAgeSeconds is how long Lambda keeps a schedule's tick
// queued (throttled: the singleton's one slot is busy) before dropping it,
// the shortest event age Lambda allows: the next tick comes within minutes.
const scheduledEventAgeSeconds = 60

// schedules ticks the provisioner, lifecycle and disruption functions.
//
// EventBridge invokes a function target asynchronously, and the two
// services retry separately. The target's RetryAttempts is EventBridge's
// own: how often it redelivers an event Lambda did not accept. Once Lambda
// has queued the event, its asynchronous invocation retries a failed run
// twice (a minute, then two minutes later) and keeps a throttled event up
// to 6 hours (Lambda developer guide, "How Lambda handles errors and
// retries with asynchronous invocation"); only the function's
// EventInvokeConfig changes that ("Configuring error handling settings for
// Lambda asynchronous invocations"). A tick is a hint: a failed or late
// one is not worth a rerun, which would double the pass's work and the
// retried runs' errors. So each scheduled function gets no retries and a
// minute of event age, and a missed tick is left to the next one.
func (b *builder) schedules() {
	for _, s := range []struct {
		id, fn  string
		minutes int
	}{
		{"ProvisionerSchedule", "provisioner", b.cfg.ProvisionerRateMinutes},
		{"LifecycleSchedule", "lifecycle", b.cfg.LifecycleRateMinutes},
		{"DisruptionSchedule", "disruption", b.cfg.DisruptionRateMinutes},
	} {
		b.Functions[s.fn].ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
			MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(scheduledEventAgeSeconds)),
			RetryAttempts: jsii.Number(0),
		})
		awsevents.NewRule(b.scope, jsii.String(s.id), &awsevents.RuleProps{
			Description: jsii.String(fmt.Sprintf("nodewright %s: %s every %d min", b.cfg.ClusterName, s.fn, s.minutes)),
			Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Minutes(jsii.Number(float64(s.minutes)))),
			// EventBridge's delivery retry: none either (see above).
			Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(b.Functions[s.fn], &awseventstargets.LambdaFunctionProps{
				RetryAttempts: jsii.Number(0),
			})},
		})
	}
}
func (b *builder) outputs() {
	st := b.scope
	out := func(id string, v *string, desc string) {
		awscdk.NewCfnOutput(st, jsii.String(id), &awscdk.CfnOutputProps{Value: v, Description: jsii.String(desc)})
	}
	out("TableName", b.Table.TableName(), "DynamoDB table with NodeClaims, leases and caches (nodewright get nodeclaims reads it)")
	out("InterruptionQueueUrl", b.InterruptionQueue.QueueUrl(), "SQS queue fed by the EC2/Health EventBridge rules")
	out("WorkQueueUrl", b.WorkQueue.QueueUrl(), "SQS queue of delayed lifecycle work")
	out("ProvisionQueueUrl", b.ProvisionQueue.QueueUrl(), "SQS queue of webhook nudges to the provisioner")
	out("DisruptionQueueUrl", b.DisruptionQueue.QueueUrl(), "SQS queue of the disruption function's delayed wake-ups")
	out("NodeRoleName", b.NodeRole.RoleName(), "The stack's node role: EC2NodeClasses naming it (or no role) launch with it")
	out("NodeRoleArn", b.NodeRole.RoleArn(), "IAM role of the nodes nodewright launches")
	out("NodeInstanceProfileName", b.instanceProfile.InstanceProfileName(), "Instance profile of the nodes")
	// nodewright doctor evaluates these roles' policies with
	// iam:SimulatePrincipalPolicy and looks for their access entries.
	out("ControllerRoleArn", b.ControllerRole.RoleArn(), "IAM role of the provisioner, interruption, disruption and lifecycle functions")
	out("WebhookRoleArn", b.webhookRole.RoleArn(), "IAM role of the admission webhook function")
	out("RegistrarRoleArn", b.registrarRole.RoleArn(), "IAM role of the webhook registration custom resource")
	for _, fn := range Functions {
		out(exportID(fn)+"FunctionName", b.Functions[fn].FunctionName(), "Lambda function "+fn)
	}
	if b.functionURL != nil {
		out("WebhookFunctionUrl", b.functionURL.Url(), "Webhook endpoint (the secret path segment is not part of this output)")
	}
	if len(b.securityGroups) == 1 && b.cfg.VpcID != "" && len(b.cfg.SecurityGroupIDs) == 0 {
		out("FunctionsSecurityGroupId", b.securityGroups[0].SecurityGroupId(), "Allow 443 from this group on the cluster security group")
	}
}

func exportID(fn string) string {
	if fn == "" {
		return fn
	}
	return strings.ToUpper(fn[:1]) + fn[1:]
}
