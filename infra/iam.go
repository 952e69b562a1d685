package infra

import (
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// IAM design: three roles, not one and not five.
//
//   - ControllerRole, shared by provisioner, interruption, disruption and
//     lifecycle. Each of the four both launches and terminates capacity
//     (interruption and disruption launch replacements before draining;
//     lifecycle terminates on liveness failures, GC and finished drains; the
//     provisioner terminates launches it abandons), reads the same cluster
//     and writes the same table. Per-function roles would repeat the same
//     EC2, IAM, EKS and DynamoDB statements four times and need four EKS
//     access entries with identical Kubernetes rights: more policy to audit
//     for no smaller blast radius.
//   - WebhookRole, for the only function reachable from outside AWS (the
//     function URL). It can read its secret and send to the provision
//     queue; it has no EC2, IAM, DynamoDB or Kubernetes rights, so a
//     compromised webhook cannot launch or terminate anything.
//   - RegistrarRole, for the CloudFormation custom resource: read the secret,
//     describe the cluster and query the claim table (to release its Nodes'
//     finalizers on delete), nothing else; runs only during deployments.
//
// Every EC2 mutation is tied to this cluster's ownership tag and to
// nodewright.io/managed-by=nodewright: creation needs the tags in the request
// (aws:RequestTag), tagging, termination and deletion need them on the
// resource (aws:ResourceTag), so the functions cannot touch anything another
// cluster or a person created, nor Karpenter's instances and templates, which
// carry the same cluster and karpenter.* tags (both can run during a
// migration). No tag can be added after creation (CreateTags is allowed only
// with ec2:CreateAction, tagging on create), so the managed-by tag cannot be
// put on someone else's instance to make it terminable.

// Tag keys come from internal/aws, which puts them on what it creates:
// fleets, instances, volumes, network interfaces and spot requests carry
// the cluster's owned tag, nodewright.io/managed-by, nodewright.io/owner,
// eks:eks-cluster-name and karpenter.sh/nodepool (the first three types in
// CreateFleet's request, the last two in the launch template's data: an
// instant fleet cannot tag them, and IAM authorizes their creation against
// the template's tags); launch templates (per EC2NodeClass, NodePool and
// spot or not) carry the owned tag, nodewright.io/managed-by,
// nodewright.io/owner, karpenter.k8s.aws/cluster and
// karpenter.k8s.aws/ec2nodeclass.

// storeActions are the DynamoDB actions internal/store calls on the table
// and its index.
var storeActions = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:Scan"}

func (b *builder) controllerRole() {
	b.roles()
	p := b.newControllerPolicy()
	// Shadow mode: reads only, so a bug cannot act. The table stays
	// writable (leases, caches and the decisions shadow mode records).
	if !b.cfg.Shadow() {
		p.launchStatements()
		p.ebsKeyStatements()
		p.tagOnCreateStatements()
		p.cleanupStatements()
	}
	p.readStatements()
	b.dataGrants()
}

// roles creates the three roles described above, without their policies.
func (b *builder) roles() {
	st := b.scope
	cluster := b.cfg.ClusterName
	b.ControllerRole = awsiam.NewRole(st, jsii.String("ControllerRole"), &awsiam.RoleProps{
		AssumedBy:   lambdaPrincipal(),
		Description: jsii.String("nodewright controllers (provisioner, interruption, disruption, lifecycle) for EKS cluster " + cluster),
	})
	b.webhookRole = awsiam.NewRole(st, jsii.String("WebhookRole"), &awsiam.RoleProps{
		AssumedBy:   lambdaPrincipal(),
		Description: jsii.String("nodewright admission webhook for EKS cluster " + cluster + ": no EC2, IAM or Kubernetes rights"),
	})
	b.registrarRole = awsiam.NewRole(st, jsii.String("RegistrarRole"), &awsiam.RoleProps{
		AssumedBy:   lambdaPrincipal(),
		Description: jsii.String("nodewright webhook registration custom resource for EKS cluster " + cluster),
	})
}

// controllerPolicy builds the controller role's statements, grouped by
// concern; its fields are the resources and tag conditions they share.
type controllerPolicy struct {
	b        *builder
	cluster  string
	ownedKey string
	// owner is the stack's owner value (settings.EnvOwner): the NodeClaim
	// table's ARN.
	owner *string
	// launched are the resources a launch creates, tagged in the request by
	// internal/aws.
	launched        []*string
	launchTemplates []*string
	// launchRequestTags and templateRequestTags are the tags internal/aws
	// puts in the request creating instances and launch templates.
	launchRequestTags   map[string]interface{}
	templateRequestTags map[string]interface{}
}

func (b *builder) newControllerPolicy() *controllerPolicy {
	p := &controllerPolicy{b: b, cluster: b.cfg.ClusterName, ownedKey: nwaws.ClusterTagKey(b.cfg.ClusterName)}
	p.launched = []*string{
		p.ec2("fleet/*"), p.ec2("instance/*"), p.ec2("volume/*"), p.ec2("network-interface/*"), p.ec2("spot-instances-request/*"),
	}
	p.launchTemplates = []*string{p.ec2("launch-template/*")}
	p.owner = b.Table.TableArn()
	p.launchRequestTags = map[string]interface{}{
		"aws:RequestTag/" + p.ownedKey:              "owned",
		"aws:RequestTag/" + nwaws.TagEKSClusterName: p.cluster,
		"aws:RequestTag/" + nwaws.TagManagedBy:      nwaws.ManagedBy,
		"aws:RequestTag/" + nwaws.TagOwner:          p.owner,
	}
	p.templateRequestTags = map[string]interface{}{
		"aws:RequestTag/" + p.ownedKey:           "owned",
		"aws:RequestTag/" + nwaws.TagClusterName: p.cluster,
		"aws:RequestTag/" + nwaws.TagManagedBy:   nwaws.ManagedBy,
		"aws:RequestTag/" + nwaws.TagOwner:       p.owner,
	}
	return p
}

// ec2 is an EC2 resource ARN in the stack's region, any account.
func (p *controllerPolicy) ec2(resource string) *string {
	return p.b.sub("arn:${AWS::Partition}:ec2:${AWS::Region}:*:" + resource)
}

// ours matches what nodewright created: its cluster's owned tag and the
// managed-by tag.
func (p *controllerPolicy) ours() map[string]interface{} {
	return map[string]interface{}{
		"aws:ResourceTag/" + p.ownedKey:         "owned",
		"aws:ResourceTag/" + nwaws.TagManagedBy: nwaws.ManagedBy,
	}
}

// thisStacks matches what this stack created: launch templates are always
// re-made with the owner tag, so they must carry it.
func (p *controllerPolicy) thisStacks() map[string]interface{} {
	m := p.ours()
	m["aws:ResourceTag/"+nwaws.TagOwner] = p.owner
	return m
}

func (p *controllerPolicy) add(props *awsiam.PolicyStatementProps) {
	p.b.ControllerRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(props))
}

// addTagged adds a statement conditioned on equal tags and on the presence
// (any value) of the tag likeKey.
func (p *controllerPolicy) addTagged(sid string, actions []string, resources []*string, equals map[string]interface{}, likeKey string) {
	p.add(&awsiam.PolicyStatementProps{
		Sid:       jsii.String(sid),
		Actions:   jsii.Strings(actions...),
		Resources: &resources,
		Conditions: &map[string]interface{}{
			"StringEquals": equals,
			"StringLike":   map[string]interface{}{likeKey: "*"},
		},
	})
}

func withCreateAction(m map[string]interface{}, actions ...string) map[string]interface{} {
	out := map[string]interface{}{"ec2:CreateAction": actions}
	for k, v := range m {
		out[k] = v
	}
	return out
}

var launchActions = []string{"ec2:CreateFleet", "ec2:RunInstances"}

func (p *controllerPolicy) launchStatements() {
	p.addTagged("LaunchTaggedForThisCluster", launchActions, p.launched,
		p.launchRequestTags, "aws:RequestTag/"+nwaws.TagNodePool)
	p.addTagged("CreateLaunchTemplatesTaggedForThisCluster", []string{"ec2:CreateLaunchTemplate"}, p.launchTemplates,
		p.templateRequestTags, "aws:RequestTag/"+nwaws.TagNodeClass)
	p.addTagged("LaunchFromOwnLaunchTemplates", launchActions, p.launchTemplates,
		p.thisStacks(), "aws:ResourceTag/"+nwaws.TagNodeClass)
	// A launch also names existing images, snapshots, subnets, security
	// groups, capacity reservations and placement groups. They are referenced, not created, so
	// they carry no request tags; the instance itself can only be created
	// under LaunchTaggedForThisCluster.
	p.add(&awsiam.PolicyStatementProps{
		Sid:     jsii.String("LaunchReferencingSharedResources"),
		Actions: jsii.Strings(launchActions...),
		Resources: &[]*string{
			p.b.sub("arn:${AWS::Partition}:ec2:${AWS::Region}::image/*"),
			p.b.sub("arn:${AWS::Partition}:ec2:${AWS::Region}::snapshot/*"),
			p.ec2("security-group/*"), p.ec2("subnet/*"), p.ec2("capacity-reservation/*"), p.ec2("placement-group/*"),
		},
	})
}

// tagOnCreateStatements allow CreateTags only as part of a create call.
// No CreateTags after launch: nodewright tags only on create (the
// instance's NodeClaim tag is in the CreateFleet request), so nothing
// can put this stack's tags on someone else's instance to make it
// terminable. (A TagOwnInstances statement once allowed it; the local
// cloud's IAM coverage showed no call used it.)
func (p *controllerPolicy) tagOnCreateStatements() {
	p.addTagged("TagOnLaunch", []string{"ec2:CreateTags"}, p.launched,
		withCreateAction(p.launchRequestTags, "CreateFleet", "RunInstances"), "aws:RequestTag/"+nwaws.TagNodePool)
	p.addTagged("TagOnLaunchTemplateCreation", []string{"ec2:CreateTags"}, p.launchTemplates,
		withCreateAction(p.templateRequestTags, "CreateLaunchTemplate"), "aws:RequestTag/"+nwaws.TagNodeClass)
}

func (p *controllerPolicy) cleanupStatements() {
	// Instances launched before owner tags existed carry none; another
	// stack's carry a different one, which IfExists still denies.
	notAnotherStacks := map[string]interface{}{"aws:ResourceTag/" + nwaws.TagOwner: p.owner}
	p.add(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("TerminateOwnInstancesOnly"),
		Actions:   jsii.Strings("ec2:TerminateInstances"),
		Resources: &[]*string{p.ec2("instance/*")},
		Conditions: &map[string]interface{}{
			"StringEquals":         p.ours(),
			"StringEqualsIfExists": notAnotherStacks,
			"StringLike":           map[string]interface{}{"aws:ResourceTag/" + nwaws.TagNodePool: "*"},
		},
	})
	p.addTagged("DeleteOwnLaunchTemplatesOnly", []string{"ec2:DeleteLaunchTemplate"}, p.launchTemplates,
		p.thisStacks(), "aws:ResourceTag/"+nwaws.TagNodeClass)
}

// readStatements: lookups, pricing, passing the node roles and describing
// the cluster (also for the registrar).
func (p *controllerPolicy) readStatements() {
	b := p.b
	// Describe* calls support no resource-level permissions; they are pinned
	// to the stack's region instead.
	p.add(&awsiam.PolicyStatementProps{
		Sid: jsii.String("RegionalRead"),
		Actions: jsii.Strings(
			"ec2:DescribeAvailabilityZones", "ec2:DescribeCapacityReservations", "ec2:DescribeImages",
			"ec2:DescribeInstances", "ec2:DescribeInstanceStatus", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes",
			"ec2:DescribeLaunchTemplates", "ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups",
			"ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
		),
		Resources: jsii.Strings("*"),
		Conditions: &map[string]interface{}{
			"StringEquals": map[string]interface{}{"aws:RequestedRegion": b.stack.Region()},
		},
	})
	// Public AMI aliases (al2023@latest ...) resolve through AWS's public
	// parameters, which live in every region; amiSelectorTerms' own
	// ssmParameter values are added by name, and no other parameter.
	p.add(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("AMIParameters"),
		Actions:   jsii.Strings("ssm:GetParameter"),
		Resources: b.amiParameterARNs(),
	})
	p.add(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("Pricing"),
		Actions:   jsii.Strings("pricing:GetProducts"),
		Resources: jsii.Strings("*"),
	})
	// Exactly the roles the EC2NodeClasses launch with (the stack's own
	// only when a class uses it), and only to EC2; shadow mode launches
	// nothing and passes none.
	if !b.cfg.Shadow() {
		p.add(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("PassNodeRolesToEC2Only"),
			Actions:   jsii.Strings("iam:PassRole"),
			Resources: b.passableNodeRoles(),
			Conditions: &map[string]interface{}{
				"StringEquals": map[string]interface{}{"iam:PassedToService": "ec2.amazonaws.com"},
			},
		})
	}
	b.clusterArn = b.stack.FormatArn(&awscdk.ArnComponents{Service: jsii.String("eks"), Resource: jsii.String("cluster"), ResourceName: jsii.String(p.cluster)})
	describeCluster := func() awsiam.PolicyStatement {
		return awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
			Sid:       jsii.String("DescribeCluster"),
			Actions:   jsii.Strings("eks:DescribeCluster"),
			Resources: &[]*string{b.clusterArn},
		})
	}
	b.ControllerRole.AddToPrincipalPolicy(describeCluster())
	b.registrarRole.AddToPrincipalPolicy(describeCluster())
}

// dataGrants: DynamoDB and SQS grants are scoped to the stack's own table
// (and its indexes) and queues.
func (b *builder) dataGrants() {
	// Exactly what internal/store calls (GrantReadWriteData would add the
	// batch, ConditionCheck, DescribeTable and stream reads, which nothing
	// uses): the local cloud's IAM coverage report shows each one used.
	b.Table.Grant(b.ControllerRole, *jsii.Strings(storeActions...)...)
	// The registrar lists claims (on stack delete) to find nodewright's
	// Nodes: a Query of the table's claim partitions, no index.
	b.registrarRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("ListNodeClaims"),
		Actions:   jsii.Strings("dynamodb:Query"),
		Resources: &[]*string{b.Table.TableArn()},
	}))
	b.InterruptionQueue.GrantConsumeMessages(b.ControllerRole)
	b.WorkQueue.GrantConsumeMessages(b.ControllerRole)
	b.WorkQueue.GrantSendMessages(b.ControllerRole)
	b.ProvisionQueue.GrantConsumeMessages(b.ControllerRole)
	// The disruption function's wake-ups: it sends them and its event
	// source mapping consumes them, on this queue only.
	b.DisruptionQueue.GrantSendMessages(b.ControllerRole)
	b.DisruptionQueue.GrantConsumeMessages(b.ControllerRole)
	// The lifecycle nudges the provisioner when a static NodePool's node
	// goes (expiry, repair, a deleted Node), so the replacement launches
	// at once; the interruption and disruption functions run their
	// provisioning pass in process.
	b.ProvisionQueue.GrantSendMessages(b.ControllerRole)

	// The webhook's only AWS action besides reading its secret: send a
	// nudge.
	b.ProvisionQueue.GrantSendMessages(b.webhookRole)
}

// amiParameterARNs are the SSM parameters AMI selection may read: AWS's
// public ones, and each ssmParameter an EC2NodeClass names (a name in the
// stack's account and region, or a full ARN, e.g. a parameter shared from
// another account).
func (b *builder) amiParameterARNs() *[]*string {
	out := []*string{b.sub("arn:${AWS::Partition}:ssm:*::parameter/aws/service/*")}
	seen := map[string]bool{}
	for _, c := range b.NodeConfig.NodeClasses {
		for _, name := range c.SSMParameters {
			if seen[name] || strings.HasPrefix(name, "/aws/service/") {
				continue
			}
			seen[name] = true
			if strings.HasPrefix(name, "arn:") {
				out = append(out, jsii.String(name))
				continue
			}
			out = append(out, b.sub("arn:${AWS::Partition}:ssm:${AWS::Region}:${AWS::AccountId}:parameter/"+strings.TrimPrefix(name, "/")))
		}
	}
	return &out
}
