package iam

import (
	"slices"
	"strings"
	"testing"
)

// calledActions are the IAM actions nodewright calls (and the local cloud's
// tests), each of which must have its reference row.
var calledActions = []string{
	"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:DeleteLaunchTemplate",
	"ec2:CreateTags", "ec2:TerminateInstances", "ec2:DescribeAvailabilityZones",
	"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus",
	"ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
	"ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets",
	"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem",
	"dynamodb:Query", "dynamodb:Scan", "dynamodb:BatchGetItem", "dynamodb:BatchWriteItem",
	"dynamodb:ConditionCheckItem", "dynamodb:DescribeTable", "dynamodb:CreateTable", "dynamodb:ListTables",
	"sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility",
	"sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:CreateQueue", "sqs:ListQueues",
	"ssm:GetParameter", "eks:DescribeCluster", "pricing:GetProducts",
	"secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret", "secretsmanager:CreateSecret",
	"secretsmanager:PutSecretValue", "sts:GetCallerIdentity", "sts:DecodeAuthorizationMessage",
	"iam:PassRole", "events:PutRule", "events:PutTargets",
}

// notActions are API operations the reference has no action for.
var notActions = []string{
	"dynamodb:TransactWriteItems", "dynamodb:TransactGetItems",
	"sqs:SendMessageBatch", "sqs:DeleteMessageBatch", "sqs:ChangeMessageVisibilityBatch",
}

func TestActionsPresent(t *testing.T) {
	for _, a := range calledActions {
		if _, ok := Actions[a]; !ok {
			t.Errorf("%s: missing from Actions", a)
		}
	}
	for k, s := range Actions {
		if k != s.Action {
			t.Errorf("Actions[%q].Action = %q", k, s.Action)
		}
		seen := map[string]bool{}
		for _, r := range s.Resources {
			if r.Name == "" || seen[r.Name] {
				t.Errorf("%s: empty or repeated resource type %q", k, r.Name)
			}
			seen[r.Name] = true
		}
		for _, d := range s.Dependent {
			if !strings.Contains(d, ":") {
				t.Errorf("%s: dependent action %q has no service prefix", k, d)
			}
		}
	}
	for _, op := range notActions {
		if _, ok := Actions[op]; ok {
			t.Errorf("%s is not an IAM action but is in Actions", op)
		}
		as, ok := AuthorizedAs[op]
		if !ok {
			t.Errorf("%s: missing from AuthorizedAs", op)
		}
		for _, a := range as {
			if _, ok := Actions[a]; !ok {
				t.Errorf("%s is authorized as %s, which is missing from Actions", op, a)
			}
		}
	}
	for a := range NoPermissionRequired {
		if _, ok := Actions[a]; !ok {
			t.Errorf("NoPermissionRequired %s: missing from Actions", a)
		}
	}
}

func TestActionsARNFormats(t *testing.T) {
	for k, s := range Actions {
		service, _, _ := strings.Cut(k, ":")
		for _, r := range s.Resources {
			key := service + ":" + r.Name
			f, ok := ARNFormats[key]
			if !ok {
				t.Errorf("%s: resource type %s has no ARN format", k, key)
				continue
			}
			if !strings.HasPrefix(f, "arn:${Partition}:") {
				t.Errorf("%s: ARN format %q", key, f)
			}
		}
	}
	for key := range ResourceTypeKeys {
		if _, ok := ARNFormats[key]; !ok {
			t.Errorf("ResourceTypeKeys has %s, ARNFormats does not", key)
		}
	}
}

func TestActionsFormatARN(t *testing.T) {
	const p, r, a = "aws", "us-east-1", "123456789012"
	for _, tc := range []struct {
		service, typ string
		ids          []string
		want         string
	}{
		{"ec2", "instance", []string{"i-0abc"}, "arn:aws:ec2:us-east-1:123456789012:instance/i-0abc"},
		{"ec2", "image", []string{"ami-1"}, "arn:aws:ec2:us-east-1::image/ami-1"},
		{"ec2", "launch-template", []string{"*"}, "arn:aws:ec2:us-east-1:123456789012:launch-template/*"},
		{"dynamodb", "table", []string{"t"}, "arn:aws:dynamodb:us-east-1:123456789012:table/t"},
		{"dynamodb", "index", []string{"t", "gsi1"}, "arn:aws:dynamodb:us-east-1:123456789012:table/t/index/gsi1"},
		{"sqs", "queue", []string{"q"}, "arn:aws:sqs:us-east-1:123456789012:q"},
		{"ssm", "parameter", []string{"/aws/service/eks/x"}, "arn:aws:ssm:us-east-1:123456789012:parameter/aws/service/eks/x"},
		{"secretsmanager", "Secret", []string{"s-AbCdEf"}, "arn:aws:secretsmanager:us-east-1:123456789012:secret:s-AbCdEf"},
		{"eks", "cluster", []string{"c"}, "arn:aws:eks:us-east-1:123456789012:cluster/c"},
		{"iam", "role", []string{"path/r"}, "arn:aws:iam::123456789012:role/path/r"},
		{"events", "rule-on-custom-event-bus", []string{"bus", "r"}, "arn:aws:events:us-east-1:123456789012:rule/bus/r"},
	} {
		got, err := FormatARN(tc.service, tc.typ, p, r, a, tc.ids...)
		if err != nil || got != tc.want {
			t.Errorf("FormatARN(%s, %s, %v) = %q, %v; want %q", tc.service, tc.typ, tc.ids, got, err, tc.want)
		}
	}
	if got, err := FormatARN("dynamodb", "index", p, r, a, "t"); err == nil {
		t.Errorf("index with one id: %q, want an error", got)
	}
	if got, err := FormatARN("ec2", "instance", p, r, a, "i-1", "i-2"); err == nil {
		t.Errorf("instance with two ids: %q, want an error", got)
	}
	if got, err := FormatARN("ec2", "no-such-type", p, r, a, "x"); err == nil {
		t.Errorf("unknown type: %q, want an error", got)
	}
	// An id holding "${" is not taken for a placeholder.
	if got, err := FormatARN("dynamodb", "index", p, r, a, "${x}", "i"); err != nil || got != "arn:aws:dynamodb:us-east-1:123456789012:table/${x}/index/i" {
		t.Errorf("id with ${: %q, %v", got, err)
	}
}

func TestActionsLookup(t *testing.T) {
	for _, name := range []string{"ec2:CreateFleet", "ec2:createfleet", "ec2:CREATEFLEET", "EC2:CreateFleet"} {
		s, ok := Lookup(name)
		if !ok || s.Action != "ec2:CreateFleet" {
			t.Errorf("Lookup(%q) = %q, %v", name, s.Action, ok)
		}
	}
	if s, ok := Lookup("dynamodb:getitem"); !ok || s.Action != "dynamodb:GetItem" {
		t.Errorf("Lookup(dynamodb:getitem) = %q, %v", s.Action, ok)
	}
	for _, name := range []string{"ec2:CreateFleets", "dynamodb:TransactWriteItems", "", "CreateFleet"} {
		if _, ok := Lookup(name); ok {
			t.Errorf("Lookup(%q) found a spec", name)
		}
	}
}

// TestActionsReferenceRows pins the rows whose shape one would guess wrong.
func TestActionsReferenceRows(t *testing.T) {
	row := func(action, typ string) *ResourceType {
		s := Actions[action]
		for i := range s.Resources {
			if s.Resources[i].Name == typ {
				return &s.Resources[i]
			}
		}
		return nil
	}
	required := func(action string, want ...string) {
		t.Helper()
		var got []string
		for _, r := range Actions[action].Resources {
			if r.Required {
				got = append(got, r.Name)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: required types %v, want %v", action, got, want)
		}
	}
	required("ec2:CreateFleet", "fleet", "instance")
	required("ec2:RunInstances", "image", "instance", "network-interface", "security-group", "subnet")
	required("ec2:CreateTags")
	required("ec2:TerminateInstances", "instance")
	required("dynamodb:Query", "table")
	required("secretsmanager:GetSecretValue", "Secret")
	for _, typ := range []string{"network-interface", "security-group", "spot-instances-request", "key-pair"} {
		if row("ec2:CreateFleet", typ) != nil {
			t.Errorf("ec2:CreateFleet lists %s; the reference authorizes it under ec2:RunInstances", typ)
		}
		if row("ec2:RunInstances", typ) == nil {
			t.Errorf("ec2:RunInstances lacks %s", typ)
		}
	}
	for _, typ := range []string{"fleet", "instance", "volume"} {
		r := row("ec2:CreateFleet", typ)
		if r == nil || !slices.Contains(r.ConditionKeys, "aws:RequestTag/${TagKey}") || !slices.Contains(r.ConditionKeys, "aws:TagKeys") {
			t.Errorf("ec2:CreateFleet %s row: %+v", typ, r)
		}
	}
	if r := row("ec2:CreateFleet", "launch-template"); r == nil || !slices.Contains(r.ConditionKeys, "ec2:ResourceTag/${TagKey}") || slices.Contains(r.ConditionKeys, "aws:RequestTag/${TagKey}") {
		t.Errorf("ec2:CreateFleet launch-template row: %+v", r)
	}
	if ct := Actions["ec2:CreateTags"]; !slices.Contains(ct.ConditionKeys, "ec2:CreateAction") || len(ct.Resources) == 0 {
		t.Errorf("ec2:CreateTags: %+v", ct)
	}
	if d := Actions["ec2:RunInstances"].Dependent; !slices.Contains(d, "iam:PassRole") || !slices.Contains(d, "ec2:CreateTags") {
		t.Errorf("ec2:RunInstances dependent actions %v", d)
	}
	if d := Actions["ec2:CreateFleet"].Dependent; slices.Contains(d, "iam:PassRole") {
		t.Errorf("ec2:CreateFleet dependent actions %v: the reference does not list iam:PassRole", d)
	}
	if pr := Actions["iam:PassRole"]; !slices.Contains(pr.ConditionKeys, "iam:PassedToService") || row("iam:PassRole", "role") == nil {
		t.Errorf("iam:PassRole: %+v", pr)
	}
	for k, s := range Actions {
		if strings.HasPrefix(k, "ec2:Describe") && (len(s.Resources) != 0 || !slices.Equal(s.ConditionKeys, []string{"ec2:Region"})) {
			t.Errorf("%s: %+v, want no resource types and ec2:Region", k, s)
		}
	}
	for _, a := range []string{"pricing:GetProducts", "dynamodb:ListTables", "sqs:ListQueues", "sts:GetCallerIdentity"} {
		if len(Actions[a].Resources) != 0 {
			t.Errorf("%s has resource types %v", a, Actions[a].Resources)
		}
	}
}
