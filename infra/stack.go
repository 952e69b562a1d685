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

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/settings"
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

// registrarServiceTimeoutSeconds is how long CloudFormation waits for the
// registrar's answer to a custom resource request before failing it.
const registrarServiceTimeoutSeconds = 300

// registrarAsyncInvoke configures how Lambda retries the registrar.
// CloudFormation invokes a custom resource's function asynchronously (Lambda
// developer guide, "Using AWS Lambda with CloudFormation"), and the handler
// answers on the request's response URL (cfn.LambdaWrap), FAILED included:
// an invocation errors only when the answer could not be sent or the run
// crashed or timed out. Lambda's default would run the request again up to
// 3 minutes later and keep a throttled one for 6 hours, long after
// CloudFormation gave up (its ServiceTimeout) and, on a failed create,
// rolled back: a late Create would then put back the webhook configuration
// or RBAC the rollback's Delete had removed, and nothing would ever remove
// them. So no retries (CloudFormation fails the resource at its timeout and
// rolls back cleanly), and a request still queued when its run could no
// longer finish inside CloudFormation's wait is dropped: the event age is
// the service timeout less the function's timeout, at least Lambda's
// minimum of 60 s.
func (b *builder) registrarAsyncInvoke() {
	age := max(registrarServiceTimeoutSeconds-b.cfg.Sized("webhookregistrar").TimeoutSeconds, 60)
	b.Functions["webhookregistrar"].ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(float64(age))),
		RetryAttempts: jsii.Number(0),
	})
}

// EKS access policy ARNs are global: arn:<partition>:eks::aws:cluster-access-policy/<name>.
func (b *builder) accessPolicy(name string) *string {
	return b.sub("arn:${AWS::Partition}:eks::aws:cluster-access-policy/" + name)
}

// clusterAdmin is the access policy of a cluster-admin entry.
func (b *builder) clusterAdmin() *[]interface{} {
	return &[]interface{}{&awseks.CfnAccessEntry_AccessPolicyProperty{
		PolicyArn:   b.accessPolicy("AmazonEKSClusterAdminPolicy"),
		AccessScope: &awseks.CfnAccessEntry_AccessScopeProperty{Type: jsii.String("cluster")},
	}}
}

func (b *builder) accessEntries() {
	if b.cfg.Shadow() {
		b.shadowAccessEntry()
		return
	}
	st := b.scope
	b.nodeAccessEntries()
	ctrl := &awseks.CfnAccessEntryProps{
		ClusterName:  jsii.String(b.cfg.ClusterName),
		PrincipalArn: b.ControllerRole.RoleArn(),
		Type:         jsii.String("STANDARD"),
	}
	if b.cfg.EKSAccess == AccessClusterAdmin {
		ctrl.AccessPolicies = b.clusterAdmin()
	} else {
		ctrl.KubernetesGroups = jsii.Strings(access.ControllerGroup)
	}
	b.controllerAccess = awseks.NewCfnAccessEntry(st, jsii.String("ControllerAccessEntry"), ctrl)
	b.registrarAccessEntry()
	b.controllersWaitFor(b.registrarResource("ControllerAccess", "Custom::NodewrightAccess", map[string]interface{}{
		// Per stack: another stack for the same cluster keeps its own.
		"Name": dnsName("nodewright-controller-", *b.stack.StackName()),
		// On delete (the stack's, as the name never changes), its claims
		// name the Nodes whose termination finalizer the registrar
		// releases once the controllers are gone.
		"TableName": b.Table.TableName(),
	}))
}

// registrarAccessEntry gives the registrar's role cluster-admin. The
// registrar creates the controllers' (or shadow mode's) ClusterRole and
// binding, and the API server lets only a holder of every right a role
// grants (or of escalate and bind, cluster-admin in effect) create one: no
// narrower EKS access policy can. Only its own function runs with its role.
func (b *builder) registrarAccessEntry() {
	b.registrarAccess = awseks.NewCfnAccessEntry(b.scope, jsii.String("WebhookRegistrarAccessEntry"), &awseks.CfnAccessEntryProps{
		ClusterName:    jsii.String(b.cfg.ClusterName),
		PrincipalArn:   b.registrarRole.RoleArn(),
		Type:           jsii.String("STANDARD"),
		AccessPolicies: b.clusterAdmin(),
	})
}

// controllersWaitFor makes the controllers wait for their access entry
// and RBAC: they must not run before they can reach the cluster, and (on
// delete) must stop before their access goes.
func (b *builder) controllersWaitFor(rbac awscdk.CustomResource) {
	for _, fn := range []string{"provisioner", "interruption", "disruption", "lifecycle"} {
		b.Functions[fn].Node().AddDependency(b.controllerAccess)
		b.Functions[fn].Node().AddDependency(rbac)
	}
}

// shadowAccessEntry gives the controller role read access to the cluster
// and nothing else: its access entry maps it to access.ShadowGroup, which
// the registrar binds to access.ShadowClusterRole, the reads the
// controllers make (Nodes, Pods, PDBs, volumes...) without a write or a
// Secret. No EKS access policy fits: AmazonEKSAdminViewPolicy reads every
// Secret, and AmazonEKSViewPolicy, which excludes them, reads no Nodes,
// PersistentVolumes or StorageClasses, which shadow mode's planning needs
// (EKS user guide, "Review access policy permissions"). So the registrar
// holds cluster-admin in shadow mode too, to create the RBAC objects. No
// node access entries (shadow mode launches no node) and no webhook.
//
// The RBAC objects are named apart from normal mode's, so switching modes
// replaces the custom resource: the old one's Delete removes the other
// mode's rights (and, leaving normal mode, releases the Nodes' finalizers,
// which shadow mode's lifecycle would never take off). A shadow-mode
// resource has no TableName: its Delete, after a switch back to normal
// mode, must leave the new controllers' finalizers alone.
func (b *builder) shadowAccessEntry() {
	b.controllerAccess = awseks.NewCfnAccessEntry(b.scope, jsii.String("ControllerAccessEntry"), &awseks.CfnAccessEntryProps{
		ClusterName:      jsii.String(b.cfg.ClusterName),
		PrincipalArn:     b.ControllerRole.RoleArn(),
		Type:             jsii.String("STANDARD"),
		KubernetesGroups: jsii.Strings(access.ShadowGroup),
	})
	b.registrarAccessEntry()
	b.controllersWaitFor(b.registrarResource("ControllerAccess", "Custom::NodewrightAccess", map[string]interface{}{
		"Name": dnsName("nodewright-shadow-", *b.stack.StackName()),
		"Mode": settings.ModeShadow,
	}))
}

func (b *builder) webhook() {
	st := b.scope
	b.webhookSecret = awssecretsmanager.NewSecret(st, jsii.String("WebhookSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("nodewright " + b.cfg.ClusterName + ": shared secret in the admission webhook URL path"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(48),
			ExcludePunctuation: jsii.Bool(true),
			IncludeSpace:       jsii.Bool(false),
		},
	})
	b.webhookSecret.GrantRead(b.webhookRole, nil)
	b.webhookSecret.GrantRead(b.registrarRole, nil)
	wh := b.Functions["webhook"]
	wh.AddEnvironment(jsii.String(settings.EnvWebhookSecretARN), b.webhookSecret.SecretArn(), nil)
	wh.AddEnvironment(jsii.String(settings.EnvWebhookPrefix), jsii.String(WebhookPathPrefix), nil)

	// Auth NONE: the caller is kube-apiserver, which cannot SigV4-sign
	// requests; it authenticates with the secret in the path instead (see
	// README.md, "Why a function URL with auth NONE").
	b.functionURL = wh.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_NONE})

	ca := b.cfg.WebhookCABundle
	if ca == "" {
		ca = amazonRootCAs
	}
	cr := b.registrarResource("WebhookRegistration", "Custom::NodewrightWebhook", map[string]interface{}{
		"WebhookName": dnsName("nodewright-", b.cfg.ClusterName),
		"FunctionUrl": b.functionURL.Url(),
		"PathPrefix":  WebhookPathPrefix,
		"SecretArn":   b.webhookSecret.SecretArn(),
		"CABundle":    ca,
		// Changing it re-registers the URL (after a secret rotation).
		"SecretGeneration": strconv.Itoa(b.cfg.WebhookSecretGeneration),
	})
	cr.Node().AddDependency(wh)
	b.webhookSecretRotation()
}

// webhookSecretRotation has the registrar rotate the webhook's secret on a
// schedule (functions/webhookregistrar, rotate.go): the secret cannot leave
// the URL, since a webhook's clientConfig has no headers and the API
// server cannot SigV4-sign for an AWS_IAM function URL, and the API server
// writes the URL into the error of every call that fails open.
func (b *builder) webhookSecretRotation() {
	days := b.cfg.WebhookSecretRotationDays
	if days <= 0 {
		return
	}
	awsevents.NewRule(b.scope, jsii.String("WebhookSecretRotation"), &awsevents.RuleProps{
		Description: jsii.String(fmt.Sprintf("nodewright %s: rotate the webhook secret every %d days", b.cfg.ClusterName, days)),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Days(jsii.Number(float64(days)))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(b.Functions["webhookregistrar"], &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
		})},
	})
	b.registrarRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("RotateWebhookSecret"),
		Actions:   jsii.Strings("secretsmanager:PutSecretValue"),
		Resources: &[]*string{b.webhookSecret.SecretArn()},
	}))
}

// registrarResource is one custom resource the webhookregistrar function
// serves, for this cluster. It needs the registrar's cluster access, so it
// depends on that access and role: created after them and, on delete,
// removed before them.
func (b *builder) registrarResource(id, resourceType string, props map[string]interface{}) awscdk.CustomResource {
	props["ClusterName"] = b.cfg.ClusterName
	b.trustProperties(resourceType, props)
	cr := awscdk.NewCustomResource(b.scope, jsii.String(id), &awscdk.CustomResourceProps{
		ServiceToken:   b.Functions["webhookregistrar"].FunctionArn(),
		ResourceType:   jsii.String(resourceType),
		ServiceTimeout: awscdk.Duration_Seconds(jsii.Number(registrarServiceTimeoutSeconds)),
		Properties:     &props,
	})
	cr.Node().AddDependency(b.registrarAccess)
	cr.Node().AddDependency(b.registrarRole)
	return cr
}

// trustProperties records a custom resource's properties for the
// registrar's environment: the CA bundle as its digest (Lambda's
// environment holds 4 KB in all).
func (b *builder) trustProperties(resourceType string, props map[string]interface{}) {
	trusted := map[string]interface{}{}
	for k, v := range props {
		if k == "CABundle" {
			k, v = admission.CABundleDigestProperty, admission.CABundleDigest(v.(string))
		}
		trusted[k] = v
	}
	if resourceType == "Custom::NodewrightAccess" {
		// Either mode's access resource is deleted naming this table at
		// most (functions/webhookregistrar, checkAccessDelete).
		trusted["StackTableName"] = b.Table.TableName()
	}
	if b.registrarTrust == nil {
		b.registrarTrust = map[string]map[string]interface{}{}
	}
	b.registrarTrust[resourceType] = trusted
}

// trustRegistrar gives the registrar the properties of its stack's custom
// resources: it refuses an invocation whose event says otherwise, so the
// right to invoke it is not the right to point the cluster's webhook, or
// the controllers' RBAC, anywhere else (functions/webhookregistrar,
// trust.go). Tokens (the function URL, the secret's and table's names)
// resolve at deploy time; none of them depends on the registrar.
func (b *builder) trustRegistrar() {
	if len(b.registrarTrust) == 0 {
		return
	}
	b.Functions["webhookregistrar"].AddEnvironment(jsii.String(settings.EnvRegistrarTrust), b.stack.ToJsonString(b.registrarTrust, nil), nil)
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
