package localcloud_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// iamCloud is a simulator-only local cloud enforcing the synthesized
// stack's IAM policies, with one deployed stack.
type iamCloud struct {
	c     *localcloud.Cloud
	ctx   context.Context
	admin sdkaws.Config
	stack *localcloud.Stack
	table string
	queue string
}

func newIAMCloud(t *testing.T) *iamCloud {
	c := localcloud.ForTest(t, localcloud.Options{ClusterName: "iam", Components: localcloud.AWS})
	if !c.IAMEnforced() {
		t.Fatal("IAM is not enforced by default")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	admin := awsConfig(t, c)
	ic := &iamCloud{c: c, ctx: ctx, admin: admin, table: "iam-claims", queue: "iam-provision"}
	if _, err := sqs.NewFromConfig(admin).CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: &ic.queue}); err != nil {
		t.Fatal(err)
	}
	sec, err := secretsmanager.NewFromConfig(admin).CreateSecret(ctx, &secretsmanager.CreateSecretInput{Name: sdkaws.String("iam-webhook"), SecretString: sdkaws.String("s3cret")})
	if err != nil {
		t.Fatal(err)
	}
	ic.stack, err = c.Deploy(localcloud.StackResources{Table: ic.table, ProvisionQueue: ic.queue, WebhookSecret: sdkaws.ToString(sec.ARN)})
	if err != nil {
		t.Fatal(err)
	}
	return ic
}

func (ic *iamCloud) as(creds sdkaws.CredentialsProvider) sdkaws.Config {
	cfg := ic.admin.Copy()
	cfg.Credentials = sdkaws.NewCredentialsCache(creds)
	return cfg
}

// denied asserts err is the service's access-denied error and returns the
// simulator's record of it.
func (ic *iamCloud) denied(t *testing.T, err error, code string) awssim.Denial {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Fatalf("err = %v, want %s", err, code)
	}
	all := ic.c.AWS.Denials()
	if len(all) == 0 {
		t.Fatal("no denial recorded")
	}
	return all[len(all)-1]
}

// Each function role can do its job and nothing else: the registrar
// describes its cluster, reads its secret and queries (never writes) the
// claim table; the webhook reads the secret
// and nudges the provision queue, and can launch nothing.
func TestRolesDoTheirJobOnly(t *testing.T) {
	ic := newIAMCloud(t)
	expected := ic.c.ExpectDenials(func(awssim.Denial) bool { return true })
	reg := ic.as(ic.stack.Registrar)
	if _, err := eks.NewFromConfig(reg).DescribeCluster(ic.ctx, &eks.DescribeClusterInput{Name: sdkaws.String("iam")}); err != nil {
		t.Errorf("registrar: describe its cluster: %v", err)
	}
	if _, err := secretsmanager.NewFromConfig(reg).GetSecretValue(ic.ctx, &secretsmanager.GetSecretValueInput{SecretId: sdkaws.String("iam-webhook")}); err != nil {
		t.Errorf("registrar: read the webhook secret: %v", err)
	}
	// It rotates the secret (functions/webhookregistrar, rotate.go); the
	// webhook, which only reads it, may not.
	if _, err := secretsmanager.NewFromConfig(reg).PutSecretValue(ic.ctx, &secretsmanager.PutSecretValueInput{SecretId: sdkaws.String("iam-webhook"), SecretString: sdkaws.String("rotated0123456789")}); err != nil {
		t.Errorf("registrar: rotate the webhook secret: %v", err)
	}
	_, err := secretsmanager.NewFromConfig(ic.as(ic.stack.Webhook)).PutSecretValue(ic.ctx, &secretsmanager.PutSecretValueInput{SecretId: sdkaws.String("iam-webhook"), SecretString: sdkaws.String("x0123456789")})
	ic.denied(t, err, "AccessDeniedException")
	// It lists claims (releasing Node finalizers on delete) and writes none.
	db := dynamodb.NewFromConfig(reg)
	_, err = db.Query(ic.ctx, &dynamodb.QueryInput{TableName: &ic.table, KeyConditionExpression: sdkaws.String("pk = :p"),
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":p": &ddbtypes.AttributeValueMemberS{Value: "nodeclaim#0"}}})
	if ae := (smithy.APIError)(nil); errors.As(err, &ae) && ae.ErrorCode() == "AccessDeniedException" {
		t.Errorf("registrar: list claims: %v", err)
	}
	_, err = db.PutItem(ic.ctx, &dynamodb.PutItemInput{TableName: &ic.table, Item: map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "x"}}})
	ic.denied(t, err, "AccessDeniedException")
	wh := ic.as(ic.stack.Webhook)
	if _, err := secretsmanager.NewFromConfig(wh).GetSecretValue(ic.ctx, &secretsmanager.GetSecretValueInput{SecretId: sdkaws.String("iam-webhook")}); err != nil {
		t.Errorf("webhook: read its secret: %v", err)
	}
	url := "http://localhost/" + ic.c.AWS.Options().AccountID + "/" + ic.queue
	if out, err := sqs.NewFromConfig(wh).GetQueueUrl(ic.ctx, &sqs.GetQueueUrlInput{QueueName: &ic.queue}); err == nil {
		url = sdkaws.ToString(out.QueueUrl)
	}
	if _, err := sqs.NewFromConfig(wh).SendMessage(ic.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: sdkaws.String("{}")}); err != nil {
		t.Errorf("webhook: nudge the provision queue: %v", err)
	}

	_, err = ec2.NewFromConfig(wh).TerminateInstances(ic.ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{"i-0123456789abcdef0"}})
	d := ic.denied(t, err, "UnauthorizedOperation")
	if d.Action != "ec2:TerminateInstances" || !strings.Contains(d.Principal, "nodewright-webhook") {
		t.Errorf("denial %+v", d)
	}
	_, err = eks.NewFromConfig(wh).DescribeCluster(ic.ctx, &eks.DescribeClusterInput{Name: sdkaws.String("iam")})
	ic.denied(t, err, "AccessDeniedException")
	_, err = eks.NewFromConfig(reg).DescribeCluster(ic.ctx, &eks.DescribeClusterInput{Name: sdkaws.String("another")})
	ic.denied(t, err, "AccessDeniedException")
	if n := expected(); n != 5 {
		t.Errorf("%d denials, want 5: %v", n, ic.c.AWS.Denials())
	}
}

// The policy bug issue 12 fixed, shown by the evaluator, with the request
// shape AWS documents: a spot CreateFleet tags its fleet, instances and
// volumes itself, and the spot-instances-request (and network interfaces)
// its launch creates take their request tags from the launch template. A
// template that leaves the spot request untagged is refused
// (UnauthorizedOperation, as ec2:RunInstances: the launch inside the fleet),
// and the encoded message decodes through STS to the resource and the
// missing keys; a template tagging it passes authorization.
func TestSpotLaunchNeedsItsRequestTagged(t *testing.T) {
	ic := newIAMCloud(t)
	ic.c.ExpectDenials(func(d awssim.Denial) bool { return d.Action == "ec2:CreateFleet" || d.Action == "ec2:RunInstances" })
	ctrl := ec2.NewFromConfig(ic.as(ic.stack.Controller))
	owner := ic.c.TableARN(ic.table)
	tags := []ec2types.Tag{
		{Key: sdkaws.String(nwaws.ClusterTagKey("iam")), Value: sdkaws.String("owned")},
		{Key: sdkaws.String(nwaws.TagEKSClusterName), Value: sdkaws.String("iam")},
		{Key: sdkaws.String(nwaws.TagManagedBy), Value: sdkaws.String(nwaws.ManagedBy)},
		{Key: sdkaws.String(nwaws.TagOwner), Value: &owner},
		{Key: sdkaws.String(nwaws.TagNodePool), Value: sdkaws.String("default")},
	}
	template := func(name string, launchTags ...ec2types.ResourceType) string {
		ltTags := []ec2types.Tag{
			{Key: sdkaws.String(nwaws.ClusterTagKey("iam")), Value: sdkaws.String("owned")},
			{Key: sdkaws.String(nwaws.TagManagedBy), Value: sdkaws.String(nwaws.ManagedBy)},
			{Key: sdkaws.String(nwaws.TagOwner), Value: &owner},
			{Key: sdkaws.String(nwaws.TagNodeClass), Value: sdkaws.String("default")},
		}
		data := &ec2types.RequestLaunchTemplateData{}
		for _, rt := range launchTags {
			data.TagSpecifications = append(data.TagSpecifications, ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: rt, Tags: tags})
		}
		if _, err := ec2.NewFromConfig(ic.admin).CreateLaunchTemplate(ic.ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &name, LaunchTemplateData: data,
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: ltTags}}}); err != nil {
			t.Fatal(err)
		}
		return name
	}
	fleet := func(lt string) error {
		var specs []ec2types.TagSpecification
		for _, rt := range []ec2types.ResourceType{ec2types.ResourceTypeFleet, ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume} {
			specs = append(specs, ec2types.TagSpecification{ResourceType: rt, Tags: tags})
		}
		_, err := ctrl.CreateFleet(ic.ctx, &ec2.CreateFleetInput{Type: ec2types.FleetTypeInstant, TagSpecifications: specs,
			TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: sdkaws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeSpot},
			LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: &lt, Version: sdkaws.String("$Latest")}}}})
		return err
	}
	err := fleet(template("nodewright/iam/eni-only", ec2types.ResourceTypeNetworkInterface))
	d := ic.denied(t, err, "UnauthorizedOperation")
	if !strings.Contains(d.Resource, ":spot-instances-request/") {
		t.Fatalf("denied on %s, want the spot-instances-request", d.Resource)
	}
	var ae smithy.APIError
	errors.As(err, &ae)
	encoded := ae.ErrorMessage()[strings.LastIndex(ae.ErrorMessage(), ": ")+2:]
	out, err := sts.NewFromConfig(ic.admin).DecodeAuthorizationMessage(ic.ctx, &sts.DecodeAuthorizationMessageInput{EncodedMessage: &encoded})
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	msg, err := iam.ParseDecodedMessage(sdkaws.ToString(out.DecodedMessage))
	if err != nil {
		t.Fatal(err)
	}
	// The launch inside the fleet is authorized as RunInstances.
	if msg.Allowed || msg.Context.Action != "ec2:RunInstances" || msg.Context.Conditions["aws:requesttag/karpenter.sh/nodepool"] != nil {
		t.Errorf("decoded message: %s", msg)
	}
	t.Logf("decoded IAM reason: %s", msg)

	if err := fleet(template("nodewright/iam/spot", ec2types.ResourceTypeNetworkInterface, ec2types.ResourceTypeSpotInstancesRequest)); err != nil {
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() == "UnauthorizedOperation" {
			t.Errorf("tagged spot launch denied: %v", err)
		}
	}
}
