package awssim

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	sqtypes "github.com/aws/aws-sdk-go-v2/service/servicequotas/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/nodewright/nodewright/internal/inspect"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// launcherRole registers a role allowed to create launch templates and
// fleets only with the request tag owner=me, and returns an EC2 client
// signing as it.
func launcherRole(t *testing.T, s *Server, cfg aws.Config) (string, *ec2.Client) {
	t.Helper()
	policy, err := iam.ParsePolicyJSON("LauncherPolicy", []byte(`{"Version":"2012-10-17","Statement":[
		{"Sid":"Tagged","Effect":"Allow","Action":["ec2:CreateLaunchTemplate","ec2:CreateTags"],"Resource":"arn:aws:ec2:*:*:launch-template/*",
		 "Condition":{"StringEquals":{"aws:RequestTag/owner":"me"}}},
		{"Sid":"NoFleets","Effect":"Deny","Action":"ec2:CreateFleet","Resource":"*"},
		{"Sid":"Regional","Effect":"Allow","Action":"ec2:Describe*","Resource":"*","Condition":{"StringEquals":{"aws:RequestedRegion":"us-west-2"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	arn := "arn:aws:iam::" + s.Options().AccountID + ":role/launcher"
	s.AddRole("AKIDDOCTORLAUNCHER", "secret", "arn:aws:sts::"+s.Options().AccountID+":assumed-role/launcher/test", Role{ARN: arn, Policies: []*iam.Policy{policy}})
	roleCfg := cfg.Copy()
	roleCfg.Credentials = credentials.NewStaticCredentialsProvider("AKIDDOCTORLAUNCHER", "secret", "")
	return arn, ec2.NewFromConfig(roleCfg)
}

// SimulatePrincipalPolicy answers as IAM's does: one EvaluationResult per
// action and resource, allowed / implicitDeny / explicitDeny, the
// statements' policy in MatchedStatements, the condition keys the caller
// did not give in MissingContextValues; an unknown principal is
// NoSuchEntity.
func TestSimulatePrincipalPolicy(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	arn, _ := launcherRole(t, s, cfg)
	c := awsiam.NewFromConfig(cfg)
	sim := func(action, resource string, entries ...iamtypes.ContextEntry) iamtypes.EvaluationResult {
		t.Helper()
		out, err := c.SimulatePrincipalPolicy(ctx(t), &awsiam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String(arn),
			ActionNames: []string{action}, ResourceArns: []string{resource}, ContextEntries: entries})
		if err != nil || len(out.EvaluationResults) != 1 {
			t.Fatalf("simulate %s: %v %+v", action, err, out)
		}
		return out.EvaluationResults[0]
	}
	owner := iamtypes.ContextEntry{ContextKeyName: aws.String("aws:RequestTag/owner"), ContextKeyType: iamtypes.ContextKeyTypeEnumString, ContextKeyValues: []string{"me"}}
	lt := "arn:aws:ec2:us-west-2:" + s.Options().AccountID + ":launch-template/*"
	if r := sim("ec2:CreateLaunchTemplate", lt, owner); r.EvalDecision != iamtypes.PolicyEvaluationDecisionTypeAllowed ||
		len(r.MatchedStatements) != 1 || aws.ToString(r.MatchedStatements[0].SourcePolicyId) != "LauncherPolicy" || aws.ToString(r.EvalResourceName) != lt {
		t.Errorf("tagged template: %+v", r)
	}
	if r := sim("ec2:CreateLaunchTemplate", lt); r.EvalDecision != iamtypes.PolicyEvaluationDecisionTypeImplicitDeny ||
		strings.Join(r.MissingContextValues, ",") != "aws:RequestTag/owner" {
		t.Errorf("untagged template: %+v, want implicitDeny missing aws:RequestTag/owner", r)
	}
	if r := sim("ec2:CreateFleet", "arn:aws:ec2:us-west-2:1:fleet/*", owner); r.EvalDecision != iamtypes.PolicyEvaluationDecisionTypeExplicitDeny {
		t.Errorf("denied fleet: %+v, want explicitDeny", r)
	}
	// No global key is added for the caller: aws:RequestedRegion only when given.
	if r := sim("ec2:DescribeSubnets", "*"); r.EvalDecision != iamtypes.PolicyEvaluationDecisionTypeImplicitDeny {
		t.Errorf("describe without aws:RequestedRegion: %+v", r)
	}
	region := iamtypes.ContextEntry{ContextKeyName: aws.String("aws:RequestedRegion"), ContextKeyType: iamtypes.ContextKeyTypeEnumString, ContextKeyValues: []string{"us-west-2"}}
	if r := sim("ec2:DescribeSubnets", "*", region); r.EvalDecision != iamtypes.PolicyEvaluationDecisionTypeAllowed {
		t.Errorf("describe in the region: %+v", r)
	}
	_, err := c.SimulatePrincipalPolicy(ctx(t), &awsiam.SimulatePrincipalPolicyInput{PolicySourceArn: aws.String("arn:aws:iam::1:role/nobody"), ActionNames: []string{"ec2:RunInstances"}})
	var nse *iamtypes.NoSuchEntityException
	if !errors.As(err, &nse) {
		t.Errorf("unknown role: %v, want NoSuchEntity", err)
	}
}

// The spot service-linked role: GetRole finds it until it is removed, then
// NoSuchEntity; CreateServiceLinkedRole makes it again, and a second
// create fails as IAM's does.
func TestSpotServiceLinkedRole(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := awsiam.NewFromConfig(cfg)
	get := func() error {
		_, err := c.GetRole(ctx(t), &awsiam.GetRoleInput{RoleName: aws.String("AWSServiceRoleForEC2Spot")})
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("the spot role exists by default: %v", err)
	}
	s.SetServiceLinkedRole("AWSServiceRoleForEC2Spot", false)
	var nse *iamtypes.NoSuchEntityException
	if err := get(); !errors.As(err, &nse) {
		t.Fatalf("removed spot role: %v, want NoSuchEntity", err)
	}
	out, err := c.CreateServiceLinkedRole(ctx(t), &awsiam.CreateServiceLinkedRoleInput{AWSServiceName: aws.String("spot.amazonaws.com")})
	if err != nil || !strings.HasSuffix(aws.ToString(out.Role.Arn), ":role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot") {
		t.Fatalf("create the spot role: %v %+v", err, out)
	}
	var invalid *iamtypes.InvalidInputException
	if _, err := c.CreateServiceLinkedRole(ctx(t), &awsiam.CreateServiceLinkedRoleInput{AWSServiceName: aws.String("spot.amazonaws.com")}); !errors.As(err, &invalid) {
		t.Errorf("second create: %v, want InvalidInput", err)
	}
}

// DryRun: the request is authorized as the call would be (UnauthorizedOperation
// when the policy refuses it), then answered DryRunOperation (HTTP 412) if
// it would have succeeded, or with the call's own error; nothing is made.
func TestDryRun(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	_, role := launcherRole(t, s, cfg)
	admin := ec2.NewFromConfig(cfg)
	ami, _ := s.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	template := func(tags []types.Tag, data []types.LaunchTemplateTagSpecificationRequest) *ec2.CreateLaunchTemplateInput {
		return &ec2.CreateLaunchTemplateInput{DryRun: aws.Bool(true), LaunchTemplateName: aws.String("dry"),
			TagSpecifications:  []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate, Tags: tags}},
			LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami), TagSpecifications: data}}
	}
	owned := []types.Tag{{Key: aws.String("owner"), Value: aws.String("me")}}
	_, err := role.CreateLaunchTemplate(ctx(t), template(owned, nil))
	var re *smithyhttp.ResponseError
	if apiCode(err) != "DryRunOperation" || !errors.As(err, &re) || re.HTTPStatusCode() != 412 {
		t.Errorf("authorized dry run: %v, want DryRunOperation (412)", err)
	}
	if _, err := role.CreateLaunchTemplate(ctx(t), template([]types.Tag{{Key: aws.String("owner"), Value: aws.String("you")}}, nil)); apiCode(err) != "UnauthorizedOperation" {
		t.Errorf("dry run the policy refuses: %v, want UnauthorizedOperation", err)
	}
	bad := []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeLaunchTemplate, Tags: owned}}
	if _, err := admin.CreateLaunchTemplate(ctx(t), template(owned, bad)); apiCode(err) != "InvalidParameterValue" {
		t.Errorf("dry run of template data tagging launch-template: %v, want InvalidParameterValue", err)
	}
	fleet := fleetInput("dry", types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))
	fleet.DryRun = aws.Bool(true)
	if _, err := admin.CreateFleet(ctx(t), fleet); apiCode(err) != "InvalidLaunchTemplateName.NotFoundException" {
		t.Errorf("dry-run fleet from a template that does not exist: %v", err)
	}
	if _, err := admin.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{DryRun: aws.Bool(true), InstanceIds: []string{"i-0123456789abcdef0"}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("dry-run terminate of an unknown instance: %v", err)
	}
	out, err := admin.DescribeLaunchTemplates(ctx(t), &ec2.DescribeLaunchTemplatesInput{})
	if err != nil || len(out.LaunchTemplates) != 0 || len(s.EC2().Instances()) != 0 {
		t.Errorf("dry runs made something: %v %+v, %d instances", err, out, len(s.EC2().Instances()))
	}
}

// What doctor reads besides IAM: Service Quotas, Lambda's account
// settings, the stack's outputs and the cluster's access entries and
// authentication mode.
func TestAccountReads(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	q := servicequotas.NewFromConfig(cfg)
	s.SetServiceQuota("ec2", "L-34B43A08", 8)
	got, err := q.GetServiceQuota(ctx(t), &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String("L-34B43A08")})
	if err != nil || aws.ToFloat64(got.Quota.Value) != 8 || !strings.Contains(aws.ToString(got.Quota.QuotaName), "Spot") {
		t.Errorf("spot vCPU quota: %v %+v", err, got)
	}
	var nsr *sqtypes.NoSuchResourceException
	if _, err := q.GetServiceQuota(ctx(t), &servicequotas.GetServiceQuotaInput{ServiceCode: aws.String("ec2"), QuotaCode: aws.String("L-NOPE")}); !errors.As(err, &nsr) {
		t.Errorf("unknown quota: %v, want NoSuchResourceException", err)
	}
	s.SetLambdaConcurrency(200, 30)
	ls, err := lambda.NewFromConfig(cfg).GetAccountSettings(ctx(t), &lambda.GetAccountSettingsInput{})
	if err != nil || ls.AccountLimit.ConcurrentExecutions != 200 || aws.ToInt32(ls.AccountLimit.UnreservedConcurrentExecutions) != 170 {
		t.Errorf("Lambda account settings: %v %+v", err, ls)
	}
	e := eks.NewFromConfig(cfg)
	role := "arn:aws:iam::" + s.Options().AccountID + ":role/path/node"
	s.PutAccessEntry(AccessEntry{PrincipalARN: role, Type: "EC2_LINUX"})
	s.SetEKSAuthenticationMode("API")
	list, err := e.ListAccessEntries(ctx(t), &eks.ListAccessEntriesInput{ClusterName: aws.String("test")})
	if err != nil || len(list.AccessEntries) != 1 || list.AccessEntries[0] != role {
		t.Errorf("list access entries: %v %+v", err, list)
	}
	one, err := e.DescribeAccessEntry(ctx(t), &eks.DescribeAccessEntryInput{ClusterName: aws.String("test"), PrincipalArn: aws.String(role)})
	if err != nil || aws.ToString(one.AccessEntry.Type) != "EC2_LINUX" {
		t.Errorf("describe access entry: %v %+v", err, one)
	}
	cl, err := e.DescribeCluster(ctx(t), &eks.DescribeClusterInput{Name: aws.String("test")})
	if err != nil || string(cl.Cluster.AccessConfig.AuthenticationMode) != "API" {
		t.Errorf("authentication mode: %v %+v", err, cl)
	}
	t.Setenv("AWS_ENDPOINT_URL", s.URL())
	if _, err := inspect.StackOutputs(ctx(t), cfg, "nodewright-test", nil); err == nil || !strings.Contains(err.Error(), "ValidationError: Stack with id nodewright-test does not exist") {
		t.Errorf("a stack not deployed: %v", err)
	}
	s.PutStack("nodewright-test", map[string]string{"TableName": "t1", "ControllerRoleArn": "arn:aws:iam::1:role/c"})
	outs, err := inspect.StackOutputs(ctx(t), cfg, "nodewright-test", nil)
	if err != nil || outs["TableName"] != "t1" || outs["ControllerRoleArn"] != "arn:aws:iam::1:role/c" {
		t.Errorf("stack outputs: %v %v", err, outs)
	}
}
