package iam

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
	"ec2:DescribeAvailabilityZones":     noResource("ec2:DescribeAvailabilityZones", "ec2:Region"),
	"ec2:DescribeCapacityReservations":  noResource("ec2:DescribeCapacityReservations", "ec2:Region"),
	"ec2:DescribeImages":                noResource("ec2:DescribeImages", "ec2:Region"),
	"ec2:DescribeInstances":             noResource("ec2:DescribeInstances", "ec2:Region"),
	"ec2:DescribeInstanceStatus":        noResource("ec2:DescribeInstanceStatus", "ec2:Region"),
	"ec2:DescribeInstanceTypeOfferings": noResource("ec2:DescribeInstanceTypeOfferings", "ec2:Region"),
	"ec2:DescribeInstanceTypes":         noResource("ec2:DescribeInstanceTypes", "ec2:Region"),
	"ec2:DescribeLaunchTemplates":       noResource("ec2:DescribeLaunchTemplates", "ec2:Region"),
	"ec2:DescribePlacementGroups":       noResource("ec2:DescribePlacementGroups", "ec2:Region"),
	"ec2:DescribeSecurityGroups":        noResource("ec2:DescribeSecurityGroups", "ec2:Region"),
	"ec2:DescribeSpotPriceHistory":      noResource("ec2:DescribeSpotPriceHistory", "ec2:Region"),
	"ec2:DescribeSubnets":               noResource("ec2:DescribeSubnets", "ec2:Region"),

	// Amazon DynamoDB (list_amazondynamodb.html). TransactWriteItems and
	// TransactGetItems are not IAM actions: see AuthorizedAs.

	// The item actions carry their condition keys on the action-level row;
	// the table row has none. dynamodb:EnclosingOperation (set to
	// TransactWriteItems/TransactGetItems inside a transaction) is listed for
	// GetItem, PutItem, UpdateItem and DeleteItem but not for ConditionCheckItem.
	"dynamodb:GetItem":            onRequired("dynamodb:GetItem", "table", "dynamodb:Attributes", "dynamodb:EnclosingOperation", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:Select"),
	"dynamodb:PutItem":            onRequired("dynamodb:PutItem", "table", "dynamodb:Attributes", "dynamodb:EnclosingOperation", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues"),
	"dynamodb:UpdateItem":         onRequired("dynamodb:UpdateItem", "table", "dynamodb:Attributes", "dynamodb:EnclosingOperation", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues"),
	"dynamodb:DeleteItem":         onRequired("dynamodb:DeleteItem", "table", "dynamodb:Attributes", "dynamodb:EnclosingOperation", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues"),
	"dynamodb:ConditionCheckItem": onRequired("dynamodb:ConditionCheckItem", "table", "dynamodb:Attributes", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:ReturnValues"),
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
	"dynamodb:BatchGetItem":   onRequired("dynamodb:BatchGetItem", "table", "dynamodb:Attributes", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity", "dynamodb:Select"),
	"dynamodb:BatchWriteItem": onRequired("dynamodb:BatchWriteItem", "table", "dynamodb:Attributes", "dynamodb:LeadingKeys", "dynamodb:ReturnConsumedCapacity"),
	"dynamodb:DescribeTable":  onRequired("dynamodb:DescribeTable", "table"),
	"dynamodb:CreateTable":    onRequired("dynamodb:CreateTable", "table", "aws:RequestTag/${TagKey}", "aws:TagKeys"),
	"dynamodb:ListTables":     noResource("dynamodb:ListTables"),

	// Amazon SQS (list_amazonsqs.html). The batch APIs are not IAM actions:
	// see AuthorizedAs.

	// No SQS action lists condition keys except CreateQueue (request tags, on
	// its action-level row); the queue type's own aws:ResourceTag/${TagKey} is in
	// ResourceTypeKeys.
	"sqs:SendMessage":             onRequired("sqs:SendMessage", "queue"),
	"sqs:ReceiveMessage":          onRequired("sqs:ReceiveMessage", "queue"),
	"sqs:DeleteMessage":           onRequired("sqs:DeleteMessage", "queue"),
	"sqs:ChangeMessageVisibility": onRequired("sqs:ChangeMessageVisibility", "queue"),
	"sqs:GetQueueAttributes":      onRequired("sqs:GetQueueAttributes", "queue"),
	"sqs:GetQueueUrl":             onRequired("sqs:GetQueueUrl", "queue"),
	"sqs:CreateQueue":             onRequired("sqs:CreateQueue", "queue", "aws:RequestTag/${TagKey}", "aws:TagKeys"),
	"sqs:ListQueues":              noResource("sqs:ListQueues"),

	// AWS Systems Manager (list_awssystemsmanager.html). ssm:GetParameters is
	// not called by nodewright; it is listed because the reference names it as a
	// dependent action of ec2:RunInstances and ec2:CreateLaunchTemplate (an AMI
	// given as resolve:ssm:<parameter>).

	"ssm:GetParameter":  onRequired("ssm:GetParameter", "parameter", "aws:ResourceTag/${TagKey}"),
	"ssm:GetParameters": onRequired("ssm:GetParameters", "parameter", "aws:ResourceTag/${TagKey}"),

	// Amazon EKS (list_amazonelastickubernetesservice.html).

	"eks:DescribeCluster": onRequired("eks:DescribeCluster", "cluster"),

	// AWS Price List (list_awspricelist.html).

	"pricing:GetProducts": noResource("pricing:GetProducts"),

	// AWS Secrets Manager (list_awssecretsmanager.html). The reference spells
	// the resource type "Secret" (capital S). All condition keys are on the
	// action-level row, not on the Secret row.

	"secretsmanager:GetSecretValue": onRequired("secretsmanager:GetSecretValue", "Secret", "secretsmanager:SecretId", "secretsmanager:VersionId", "secretsmanager:VersionStage", "secretsmanager:resource/AllowRotationLambdaArn", "secretsmanager:ResourceTag/tag-key", "aws:ResourceTag/${TagKey}", "secretsmanager:SecretPrimaryRegion", "secretsmanager:resource/Type"),
	"secretsmanager:DescribeSecret": onRequired("secretsmanager:DescribeSecret", "Secret", "secretsmanager:SecretId", "secretsmanager:resource/AllowRotationLambdaArn", "secretsmanager:ResourceTag/tag-key", "aws:ResourceTag/${TagKey}", "secretsmanager:SecretPrimaryRegion", "secretsmanager:resource/Type"),
	"secretsmanager:CreateSecret":   onRequired("secretsmanager:CreateSecret", "Secret", "secretsmanager:Name", "secretsmanager:Description", "secretsmanager:KmsKeyArn", "secretsmanager:KmsKeyId", "aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "secretsmanager:ResourceTag/tag-key", "secretsmanager:AddReplicaRegions", "secretsmanager:ForceOverwriteReplicaSecret", "secretsmanager:Type"),
	"secretsmanager:PutSecretValue": onRequired("secretsmanager:PutSecretValue", "Secret", "secretsmanager:SecretId", "secretsmanager:resource/AllowRotationLambdaArn", "secretsmanager:ResourceTag/tag-key", "aws:ResourceTag/${TagKey}", "secretsmanager:SecretPrimaryRegion", "secretsmanager:resource/Type"),

	// AWS STS (list_awssecuritytokenservice.html).

	// Listed in the reference (Read, no resource types), but no permission
	// is needed: see NoPermissionRequired.
	"sts:GetCallerIdentity":          noResource("sts:GetCallerIdentity"),
	"sts:DecodeAuthorizationMessage": noResource("sts:DecodeAuthorizationMessage"),

	// IAM (list_awsidentityandaccessmanagementiam.html).

	// Authorized against the role (not the instance profile a launch names).
	"iam:PassRole": onRequired("iam:PassRole", "role", "iam:AssociatedResourceArn", "iam:PassedToService"),

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

// onRequired is an action authorized against one required resource type
// whose row lists no condition keys; keys are the action-level row's.
func onRequired(action, resourceType string, keys ...string) ActionSpec {
	return ActionSpec{Action: action, Resources: []ResourceType{{Name: resourceType, Required: true}}, ConditionKeys: keys}
}

// noResource is an action with no resource-level permissions (Resource
// "*"); keys are the action-level row's.
func noResource(action string, keys ...string) ActionSpec {
	return ActionSpec{Action: action, ConditionKeys: keys}
}
