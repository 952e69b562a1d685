package iam

import (
	"fmt"
	"strings"
)

// The rows below are the AWS Service Authorization Reference's entries for
// the actions nodewright (and the local cloud's tests) call:
// https://docs.aws.amazon.com/service-authorization/latest/reference/
// (list_amazonec2.html, list_amazondynamodb.html, list_amazonsqs.html,
// list_awssystemsmanager.html, list_amazonelastickubernetesservice.html,
// list_awspricelist.html, list_awssecretsmanager.html,
// list_awssecuritytokenservice.html,
// list_awsidentityandaccessmanagementiam.html). A resource type an action's
// row does not list is not authorized for it; condition keys a row does not
// list are absent from that resource's request context.

// ResourceType is one row of an action's entry in the Service Authorization
// Reference: the resource type the action is authorized against, whether it
// is required, and the condition keys that row lists.
type ResourceType struct {
	Name          string
	Required      bool
	ConditionKeys []string
}

// ActionSpec is one action of the reference.
type ActionSpec struct {
	Action        string
	Resources     []ResourceType // empty: no resource-level permissions (Resource "*")
	ConditionKeys []string       // keys on the action's row without a resource type
	Dependent     []string
}

var (
	createdKeys  = []string{"aws:RequestTag/${TagKey}", "aws:TagKeys"}
	existingKeys = []string{"aws:ResourceTag/${TagKey}", "ec2:ResourceTag/${TagKey}"}
	tagKeys      = []string{"aws:RequestTag/${TagKey}", "aws:TagKeys", "aws:ResourceTag/${TagKey}", "ec2:CreateAction", "ec2:ResourceTag/${TagKey}"}
)

func rows(required []string, optional []string, keys []string) []ResourceType {
	var out []ResourceType
	for _, n := range required {
		out = append(out, ResourceType{Name: n, Required: true, ConditionKeys: keys})
	}
	for _, n := range optional {
		out = append(out, ResourceType{Name: n, ConditionKeys: keys})
	}
	return out
}

// launchRows: CreateFleet and RunInstances are authorized against what
// they create (with the request's tags) and what they use (with its tags).
func launchRows(created ...string) []ResourceType {
	return append(rows(created[:1], created[1:], createdKeys),
		rows(nil, []string{"image", "launch-template", "security-group", "subnet", "snapshot", "key-pair", "capacity-reservation", "placement-group"}, existingKeys)...)
}

var ec2Taggable = []string{"instance", "volume", "network-interface", "fleet", "spot-instances-request", "launch-template", "image", "subnet", "security-group", "snapshot"}

// Actions is keyed by the IAM action name, e.g. "ec2:CreateFleet".
var Actions = index(
	ActionSpec{Action: "ec2:CreateFleet", Resources: launchRows("fleet", "instance", "volume", "network-interface", "spot-instances-request"), Dependent: []string{"ec2:CreateTags", "iam:PassRole"}},
	ActionSpec{Action: "ec2:RunInstances", Resources: launchRows("instance", "volume", "network-interface", "spot-instances-request"), Dependent: []string{"ec2:CreateTags", "iam:PassRole"}},
	// CreateLaunchTemplate is authorized against the template alone: the
	// image and groups in its data are authorized when it is launched.
	// Karpenter's scoped controller policy (getting-started CloudFormation
	// template, v1) grants it on launch-template only and works in AWS.
	ActionSpec{Action: "ec2:CreateLaunchTemplate", Resources: rows([]string{"launch-template"}, nil, createdKeys), Dependent: []string{"ec2:CreateTags"}},
	ActionSpec{Action: "ec2:DeleteLaunchTemplate", Resources: rows([]string{"launch-template"}, nil, existingKeys)},
	ActionSpec{Action: "ec2:CreateTags", Resources: rows(nil, ec2Taggable, tagKeys)},
	ActionSpec{Action: "ec2:TerminateInstances", Resources: rows([]string{"instance"}, nil, existingKeys)},
	ActionSpec{Action: "ec2:DescribeAvailabilityZones"},
	ActionSpec{Action: "ec2:DescribeCapacityReservations"},
	ActionSpec{Action: "ec2:DescribeImages"},
	ActionSpec{Action: "ec2:DescribeInstances"},
	ActionSpec{Action: "ec2:DescribeInstanceTypeOfferings"},
	ActionSpec{Action: "ec2:DescribeInstanceTypes"},
	ActionSpec{Action: "ec2:DescribeLaunchTemplates"},
	ActionSpec{Action: "ec2:DescribeSecurityGroups"},
	ActionSpec{Action: "ec2:DescribeSpotPriceHistory"},
	ActionSpec{Action: "ec2:DescribeSubnets"},

	ActionSpec{Action: "dynamodb:GetItem", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:PutItem", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:UpdateItem", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:DeleteItem", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:ConditionCheckItem", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:BatchGetItem", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:BatchWriteItem", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:DescribeTable", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:CreateTable", Resources: rows([]string{"table"}, nil, nil)},
	ActionSpec{Action: "dynamodb:Query", Resources: rows([]string{"table"}, []string{"index"}, nil)},
	ActionSpec{Action: "dynamodb:Scan", Resources: rows([]string{"table"}, []string{"index"}, nil)},
	ActionSpec{Action: "dynamodb:ListTables"},

	ActionSpec{Action: "sqs:SendMessage", Resources: rows([]string{"queue"}, nil, nil)},
	ActionSpec{Action: "sqs:ReceiveMessage", Resources: rows([]string{"queue"}, nil, nil)},
	ActionSpec{Action: "sqs:DeleteMessage", Resources: rows([]string{"queue"}, nil, nil)},
	ActionSpec{Action: "sqs:ChangeMessageVisibility", Resources: rows([]string{"queue"}, nil, nil)},
	ActionSpec{Action: "sqs:GetQueueAttributes", Resources: rows([]string{"queue"}, nil, nil)},
	ActionSpec{Action: "sqs:GetQueueUrl", Resources: rows([]string{"queue"}, nil, nil)},
	ActionSpec{Action: "sqs:CreateQueue", Resources: rows([]string{"queue"}, nil, createdKeys)},
	ActionSpec{Action: "sqs:ListQueues"},

	ActionSpec{Action: "ssm:GetParameter", Resources: rows([]string{"parameter"}, nil, []string{"aws:ResourceTag/${TagKey}"})},
	ActionSpec{Action: "eks:DescribeCluster", Resources: rows([]string{"cluster"}, nil, []string{"aws:ResourceTag/${TagKey}"})},
	ActionSpec{Action: "pricing:GetProducts"},
	ActionSpec{Action: "secretsmanager:GetSecretValue", Resources: rows([]string{"Secret"}, nil, []string{"aws:ResourceTag/${TagKey}"})},
	ActionSpec{Action: "secretsmanager:DescribeSecret", Resources: rows([]string{"Secret"}, nil, []string{"aws:ResourceTag/${TagKey}"})},
	ActionSpec{Action: "secretsmanager:PutSecretValue", Resources: rows([]string{"Secret"}, nil, []string{"aws:ResourceTag/${TagKey}"})},
	ActionSpec{Action: "secretsmanager:CreateSecret", Resources: rows([]string{"Secret"}, nil, createdKeys)},
	ActionSpec{Action: "sts:GetCallerIdentity"},
	ActionSpec{Action: "sts:DecodeAuthorizationMessage"},
	ActionSpec{Action: "iam:PassRole", Resources: rows([]string{"role"}, nil, nil), ConditionKeys: []string{"iam:AssociatedResourceArn", "iam:PassedToService"}},
	ActionSpec{Action: "events:PutRule", Resources: rows([]string{"rule"}, nil, createdKeys)},
	ActionSpec{Action: "events:PutTargets", Resources: rows([]string{"rule"}, nil, nil)},
)

func index(specs ...ActionSpec) map[string]ActionSpec {
	m := make(map[string]ActionSpec, len(specs))
	for _, s := range specs {
		m[s.Action] = s
	}
	return m
}

// ARNFormats maps "service:resource-type" to the reference's ARN format.
var ARNFormats = map[string]string{
	"ec2:instance":               "arn:${Partition}:ec2:${Region}:${Account}:instance/${InstanceId}",
	"ec2:launch-template":        "arn:${Partition}:ec2:${Region}:${Account}:launch-template/${LaunchTemplateId}",
	"ec2:image":                  "arn:${Partition}:ec2:${Region}::image/${ImageId}",
	"dynamodb:table":             "arn:${Partition}:dynamodb:${Region}:${Account}:table/${TableName}",
	"dynamodb:index":             "arn:${Partition}:dynamodb:${Region}:${Account}:table/${TableName}/index/${IndexName}",
	"sqs:queue":                  "arn:${Partition}:sqs:${Region}:${Account}:${QueueName}",
	"eks:cluster":                "arn:${Partition}:eks:${Region}:${Account}:cluster/${ClusterName}",
	"iam:role":                   "arn:${Partition}:iam::${Account}:role/${RoleNameWithPath}",
	"secretsmanager:Secret":      "arn:${Partition}:secretsmanager:${Region}:${Account}:secret:${SecretId}",
	"ssm:parameter":              "arn:${Partition}:ssm:${Region}:${Account}:parameter/${ParameterNameWithoutLeadingSlash}",
	"ec2:spot-instances-request": "arn:${Partition}:ec2:${Region}:${Account}:spot-instances-request/${SpotInstanceRequestId}",
}

// Lookup returns the spec of action (case-insensitive, as IAM is).
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

// FormatARN formats an ARN for a resource type, replacing the placeholders
// after the fixed ones with ids in order.
func FormatARN(service, resourceType, partition, region, account string, ids ...string) (string, error) {
	f, ok := ARNFormats[service+":"+resourceType]
	if !ok {
		return "", fmt.Errorf("no ARN format for %s:%s", service, resourceType)
	}
	f = strings.NewReplacer("${Partition}", partition, "${Region}", region, "${Account}", account).Replace(f)
	for _, id := range ids {
		i := strings.Index(f, "${")
		j := strings.Index(f[i:], "}")
		if i < 0 || j < 0 {
			return "", fmt.Errorf("%s:%s takes fewer ids", service, resourceType)
		}
		f = f[:i] + id + f[i+j+1:]
	}
	if strings.Contains(f, "${") {
		return "", fmt.Errorf("%s:%s needs more ids", service, resourceType)
	}
	return f, nil
}
