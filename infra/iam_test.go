package infra

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/access"
)

func TestNodeRoleAndAccessEntries(t *testing.T) {
	_, tpl, j := full(t)
	nodeRole := logicalID(t, j, "AWS::IAM::Role", "NodeRole")
	var arns []string
	for _, r := range resources(j, "AWS::IAM::Role") {
		if r.ID == nodeRole {
			if r.Props["RoleName"] != DefaultNodeRoleName(testCluster) {
				t.Errorf("node role name %v", r.Props["RoleName"])
			}
			for _, a := range asList(r.Props["ManagedPolicyArns"]) {
				arns = append(arns, js(a))
			}
			if !strings.Contains(js(r.Props["AssumeRolePolicyDocument"]), "ec2.amazonaws.com") {
				t.Errorf("node role trust = %s", js(r.Props["AssumeRolePolicyDocument"]))
			}
		}
	}
	for _, p := range NodeManagedPolicies {
		if !strings.Contains(strings.Join(arns, " "), ":iam::aws:policy/"+p+`"`) {
			t.Errorf("node role lacks %s: %v", p, arns)
		}
	}
	check(t, "instance profile", func() {
		tpl.HasResourceProperties(jsii.String("AWS::IAM::InstanceProfile"), map[string]interface{}{
			"InstanceProfileName": "nodewright-example-nodewright-node-example",
			"Roles":               []interface{}{map[string]interface{}{"Ref": nodeRole}},
		})
	})
	check(t, "node access entry", func() {
		tpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), map[string]interface{}{
			"ClusterName": testCluster, "Type": "EC2_LINUX",
			"PrincipalArn": map[string]interface{}{"Fn::GetAtt": []interface{}{nodeRole, "Arn"}},
		})
	})
	ctrl := logicalID(t, j, "AWS::IAM::Role", "ControllerRole")
	check(t, "controller access entry: a group, no access policy", func() {
		tpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), map[string]interface{}{
			"ClusterName": testCluster, "Type": "STANDARD",
			"PrincipalArn":     map[string]interface{}{"Fn::GetAtt": []interface{}{ctrl, "Arn"}},
			"KubernetesGroups": []interface{}{access.ControllerGroup},
			"AccessPolicies":   assertions.Match_Absent(),
		})
	})
	check(t, "three access entries", func() { tpl.ResourceCountIs(jsii.String("AWS::EKS::AccessEntry"), jsii.Number(3)) })
	checkAccess(t, j, false)
	// The webhook's role has no cluster access at all.
	wh := logicalID(t, j, "AWS::IAM::Role", "WebhookRole")
	for _, e := range resources(j, "AWS::EKS::AccessEntry") {
		if strings.Contains(js(e.Props["PrincipalArn"]), wh) {
			t.Errorf("the webhook role has an access entry (%s)", e.ID)
		}
	}
}

var sharedLaunchResource = regexp.MustCompile(`:(image|snapshot|security-group|subnet|capacity-reservation|placement-group)/\*`)

func TestIAMLeastPrivilege(t *testing.T) {
	_, _, j := full(t)
	owned := "aws:ResourceTag/kubernetes.io/cluster/" + testCluster
	requested := "aws:RequestTag/kubernetes.io/cluster/" + testCluster
	// Karpenter's instances and templates carry the same cluster tags; only
	// the managed-by tag keeps nodewright off them during a migration.
	managed := "nodewright.io/managed-by"
	nodeRole := logicalID(t, j, "AWS::IAM::Role", "NodeRole")
	table := logicalID(t, j, "AWS::DynamoDB::Table", "Table")
	// The owner tag (the table's ARN) keeps a stack off another stack's
	// resources for the same cluster.
	ownerARN := js(map[string]interface{}{"Fn::GetAtt": []interface{}{table, "Arn"}})
	ownerKey := "nodewright.io/owner"
	seen := map[string]bool{}
	for _, s := range statements(j) {
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Actions {
			seen[a] = true
			if a == "*" || strings.HasSuffix(a, ":*") {
				t.Errorf("%s: service-wide action %q", s.Policy, a)
			}
		}
		res := js(s.Resources)
		if s.has("ec2:TerminateInstances") || s.has("ec2:DeleteLaunchTemplate") {
			if s.cond("StringEquals", owned) != "owned" {
				t.Errorf("%s: %v without %s=owned: %s", s.Policy, s.Actions, owned, js(s.Condition))
			}
			if s.cond("StringEquals", "aws:ResourceTag/"+managed) != "nodewright" {
				t.Errorf("%s: %v without aws:ResourceTag/%s=nodewright (would reach Karpenter's resources): %s", s.Policy, s.Actions, managed, js(s.Condition))
			}
			if js(s.cond("StringEquals", "aws:ResourceTag/"+ownerKey)) != ownerARN && js(s.cond("StringEqualsIfExists", "aws:ResourceTag/"+ownerKey)) != ownerARN {
				t.Errorf("%s: %v without aws:ResourceTag/%s = the table's ARN (would reach another stack's resources): %s", s.Policy, s.Actions, ownerKey, js(s.Condition))
			}
		}
		for _, a := range []string{"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags"} {
			if !s.has(a) {
				continue
			}
			switch {
			case s.cond("StringEquals", requested) == "owned":
				if s.cond("StringEquals", "aws:RequestTag/"+managed) != "nodewright" {
					t.Errorf("%s: %s request-tag condition lacks %s=nodewright", s.Policy, a, managed)
				}
				if js(s.cond("StringEquals", "aws:RequestTag/"+ownerKey)) != ownerARN {
					t.Errorf("%s: %s request-tag condition lacks %s = the table's ARN", s.Policy, a, ownerKey)
				}
				if s.cond("StringEquals", "aws:RequestTag/eks:eks-cluster-name") != testCluster && s.cond("StringEquals", "aws:RequestTag/karpenter.k8s.aws/cluster") != testCluster {
					t.Errorf("%s: %s request-tag condition lacks the cluster name tag", s.Policy, a)
				}
				// What is created is attributable: instances to a NodePool,
				// launch templates to an EC2NodeClass.
				if s.cond("StringLike", "aws:RequestTag/karpenter.sh/nodepool") != "*" && s.cond("StringLike", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass") != "*" {
					t.Errorf("%s: %s without a nodepool or ec2nodeclass request tag", s.Policy, a)
				}
				if strings.Contains(res, "launch-template/") != (s.cond("StringLike", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass") == "*") {
					t.Errorf("%s: %s: launch templates must be tagged with their EC2NodeClass, instances with their NodePool", s.Policy, a)
				}
			case s.cond("StringEquals", owned) == "owned":
				if s.cond("StringEquals", "aws:ResourceTag/"+managed) != "nodewright" {
					t.Errorf("%s: %s on resources without %s=nodewright", s.Policy, a, managed)
				}
				// Tagging after creation must not be able to add the managed-by
				// tag, or Karpenter's instance could be made terminable.
				if a == "ec2:CreateTags" {
					keys := js(s.cond("ForAllValues:StringEquals", "aws:TagKeys"))
					if keys == "null" || strings.Contains(keys, managed) {
						t.Errorf("%s: CreateTags after creation may add %s (allowed keys %s)", s.Policy, managed, keys)
					}
				}
				if a == "ec2:CreateLaunchTemplate" {
					t.Errorf("%s: CreateLaunchTemplate must be conditioned on request tags", s.Policy)
				}
			default:
				// Only references to existing shared resources may go unconditioned.
				for _, r := range s.Resources {
					if a == "ec2:CreateTags" || a == "ec2:CreateLaunchTemplate" || !sharedLaunchResource.MatchString(js(r)) {
						t.Errorf("%s: %s on %s without a cluster tag condition", s.Policy, a, js(r))
					}
				}
			}
		}
		if s.has("iam:PassRole") {
			if strings.Contains(res, "*") || res != js([]interface{}{map[string]interface{}{"Fn::GetAtt": []interface{}{nodeRole, "Arn"}}}) {
				t.Errorf("%s: PassRole on %s, want only the node role", s.Policy, res)
			}
			if s.cond("StringEquals", "iam:PassedToService") != "ec2.amazonaws.com" {
				t.Errorf("%s: PassRole without iam:PassedToService=ec2.amazonaws.com", s.Policy)
			}
		}
		if s.has("ssm:GetParameter") && !strings.Contains(res, ":parameter/aws/service/*") {
			t.Errorf("%s: ssm:GetParameter on %s", s.Policy, res)
		}
		if s.has("eks:DescribeCluster") && !strings.Contains(res, ":cluster/"+testCluster) {
			t.Errorf("%s: eks:DescribeCluster on %s", s.Policy, res)
		}
		for _, a := range s.Actions {
			if strings.HasPrefix(a, "dynamodb:") {
				for _, r := range s.Resources {
					if !strings.Contains(js(r), table) {
						t.Errorf("%s: %s on %s, not the stack's table", s.Policy, a, js(r))
					}
				}
			}
			if strings.HasPrefix(a, "sqs:") && s.Principal == nil {
				for _, r := range s.Resources {
					if !strings.Contains(js(r), "Queue") {
						t.Errorf("%s: %s on %s, not the stack's queues", s.Policy, a, js(r))
					}
				}
			}
		}
		if s.Resources != nil && res == `["*"]` {
			for _, a := range s.Actions {
				if !strings.HasPrefix(a, "ec2:Describe") && a != "pricing:GetProducts" && !strings.HasPrefix(a, "ec2:") {
					t.Errorf("%s: %s on *", s.Policy, a)
				}
				if strings.HasPrefix(a, "ec2:Describe") && s.cond("StringEquals", "aws:RequestedRegion") == nil {
					t.Errorf("%s: %s on * not pinned to the region", s.Policy, a)
				}
			}
		}
	}
	for _, a := range []string{"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags", "ec2:TerminateInstances",
		"ec2:DeleteLaunchTemplate", "iam:PassRole", "ssm:GetParameter", "pricing:GetProducts", "eks:DescribeCluster",
		"ec2:DescribeSpotPriceHistory", "ec2:DescribeCapacityReservations", "ec2:DescribePlacementGroups", "sqs:ReceiveMessage", "sqs:SendMessage", "dynamodb:PutItem", "secretsmanager:GetSecretValue"} {
		if !seen[a] {
			t.Errorf("no policy grants %s", a)
		}
	}
}

func TestWebhookRoleIsolated(t *testing.T) {
	_, _, j := full(t)
	wh := logicalID(t, j, "AWS::IAM::Role", "WebhookRole")
	for _, p := range resources(j, "AWS::IAM::Policy") {
		if !strings.Contains(js(p.Props["Roles"]), wh) {
			continue
		}
		for _, s := range statements(map[string]interface{}{"Resources": map[string]interface{}{p.ID: p.Raw}}) {
			for _, a := range s.Actions {
				switch {
				case strings.HasPrefix(a, "logs:") || strings.HasPrefix(a, "secretsmanager:"):
				case a == "sqs:SendMessage" || a == "sqs:GetQueueAttributes" || a == "sqs:GetQueueUrl":
					if !strings.Contains(js(s.Resources), "ProvisionQueue") {
						t.Errorf("webhook role may %s on %s", a, js(s.Resources))
					}
				default:
					t.Errorf("webhook role may %s", a)
				}
			}
		}
	}
}

// Only the controller role reaches the disruption queue, with exactly
// SendMessage (the disruption function's wake-ups) and what its event
// source mapping needs to consume them, in statements naming only the
// stack's queues.
func TestDisruptionQueueGrants(t *testing.T) {
	_, _, j := full(t)
	dq := logicalID(t, j, "AWS::SQS::Queue", "DisruptionQueue")
	ctrl := logicalID(t, j, "AWS::IAM::Role", "ControllerRole")
	queues := map[string]bool{}
	for _, q := range resources(j, "AWS::SQS::Queue") {
		queues[js(map[string]interface{}{"Fn::GetAtt": []interface{}{q.ID, "Arn"}})] = true
	}
	var actions []string
	for _, p := range resources(j, "AWS::IAM::Policy") {
		for _, s := range statements(map[string]interface{}{"Resources": map[string]interface{}{p.ID: p.Raw}}) {
			if !strings.Contains(js(s.Resources), dq) {
				continue
			}
			if js(p.Props["Roles"]) != `[{"Ref":"`+ctrl+`"}]` {
				t.Errorf("%s grants %v on the disruption queue to %s", p.ID, s.Actions, js(p.Props["Roles"]))
			}
			// CDK merges grants with the same actions; every other resource
			// of such a statement must be another of the stack's queues.
			for _, r := range s.Resources {
				if !queues[js(r)] {
					t.Errorf("%s: %v on %s, not one of the stack's queues", p.ID, s.Actions, js(r))
				}
			}
			actions = append(actions, s.Actions...)
		}
	}
	slices.Sort(actions)
	want := []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:SendMessage"}
	if got := slices.Compact(actions); !slices.Equal(got, want) {
		t.Errorf("actions on the disruption queue = %v, want %v", got, want)
	}
}
