package localcloud_test

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata/userdatatest"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// awsConfig loads the SDK configuration the way every nodewright binary
// does, from the environment the local cloud publishes.
func awsConfig(t *testing.T, c *localcloud.Cloud) aws.Config {
	t.Helper()
	return awsConfigFromEnv(t, c.Env())
}

// awsConfigFromEnv sets env (KEY=value items) for the test and loads the
// SDK configuration from it.
func awsConfigFromEnv(t *testing.T, env []string) aws.Config {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(testCtx(t))
	if err != nil {
		t.Fatalf("load AWS config from the local cloud env: %v", err)
	}
	return cfg
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestEnvNamesEveryComponent(t *testing.T) {
	c := shared.Get(t)
	env := map[string]string{}
	for _, kv := range c.Env() {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			t.Fatalf("malformed env entry %q", kv)
		}
		env[k] = v
	}
	want := map[string]string{
		"AWS_ENDPOINT_URL":          c.AWSEndpoint,
		"AWS_ENDPOINT_URL_DYNAMODB": c.DynamoDBEndpoint,
		"AWS_REGION":                "us-west-2",
		"KUBECONFIG":                c.Kubeconfig,
		"NODEWRIGHT_CLUSTER_NAME":   "harness",
		"AWS_ACCESS_KEY_ID":         localcloud.AccessKeyID,
	}
	for k, v := range want {
		if v == "" || env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	if _, err := os.Stat(c.Kubeconfig); err != nil {
		t.Errorf("kubeconfig: %v", err)
	}
}

func TestSaveLogsKeepsEveryComponentLog(t *testing.T) {
	c := shared.Get(t)
	dir, err := c.SaveLogs()
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"etcd.log", "kube-apiserver.log", "kube-controller-manager.log", "kube-scheduler.log", "kwok.log", "dynalite.log"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("saved logs lack %s: %v", name, err)
			continue
		}
		if name == "kube-apiserver.log" && st.Size() == 0 {
			t.Errorf("%s is empty", name)
		}
	}
}

// The environment routes DynamoDB to dynalite and everything else to the
// simulator: a conditional write conflict comes back as the SDK's typed error.
func TestDynamoDBConditionalWriteConflictThroughEnv(t *testing.T) {
	c := shared.Get(t)
	ctx := testCtx(t)
	db := dynamodb.NewFromConfig(awsConfig(t, c))
	table := "leases-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
	if _, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []ddbtypes.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: ddbtypes.ScalarAttributeTypeS}},
		KeySchema:            []ddbtypes.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: ddbtypes.KeyTypeHash}},
		BillingMode:          ddbtypes.BillingModePayPerRequest,
	}); err != nil {
		t.Fatalf("create table: %v", err)
	}
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, time.Minute); err != nil {
		t.Fatalf("wait for table: %v", err)
	}
	acquire := func(holder string) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:           aws.String(table),
			Item:                map[string]ddbtypes.AttributeValue{"pk": &ddbtypes.AttributeValueMemberS{Value: "provisioner"}, "holder": &ddbtypes.AttributeValueMemberS{Value: holder}},
			ConditionExpression: aws.String("attribute_not_exists(pk) OR holder = :me"),
			ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{
				":me": &ddbtypes.AttributeValueMemberS{Value: holder},
			},
		})
		return err
	}
	if err := acquire("a"); err != nil {
		t.Fatalf("first acquire: %v", err)
	}
	if err := acquire("a"); err != nil {
		t.Fatalf("re-acquire by the holder: %v", err)
	}
	var ccf *ddbtypes.ConditionalCheckFailedException
	if err := acquire("b"); !errors.As(err, &ccf) {
		t.Fatalf("acquire by another holder: got %v, want ConditionalCheckFailedException", err)
	}
}

var al2023UserData = userdatatest.NodeConfig{Cluster: "harness", Kubelet: map[string]any{"maxPods": 29},
	Flags: []string{`--node-labels="karpenter.sh/nodepool=default,karpenter.sh/capacity-type=on-demand"`}}.Base64()

// The whole launch path against real servers: SSM AMI parameter, security
// group discovery, a launch template and an instant CreateFleet through the
// unmodified SDK; the simulator's kubelet registers the instance as a Node,
// KWOK makes it Ready, the real scheduler places a pod on it and KWOK runs
// it; terminating the instance removes the Node.
func TestCreateFleetInstanceBecomesReadyNode(t *testing.T) {
	c := shared.Get(t)
	ctx := testCtx(t)
	cfg := awsConfig(t, c)
	ec2c := ec2.NewFromConfig(cfg)

	param, err := ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/1.37/amazon-linux-2023/x86_64/standard/recommended/image_id"),
	})
	if err != nil {
		t.Fatalf("SSM AMI parameter: %v", err)
	}
	sgs, err := ec2c.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{c.ClusterName}}},
	})
	if err != nil || len(sgs.SecurityGroups) == 0 {
		t.Fatalf("discover security groups: %v (%d found)", err, len(sgs.SecurityGroups))
	}
	ltName := "harness-" + time.Now().Format("150405.000")
	if _, err := ec2c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(ltName),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{
			ImageId:          param.Parameter.Value,
			UserData:         aws.String(al2023UserData),
			SecurityGroupIds: []string{*sgs.SecurityGroups[0].GroupId},
		},
	}); err != nil {
		t.Fatalf("create launch template: %v", err)
	}
	fleet, err := ec2c.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(ltName), Version: aws.String("$Latest")},
			Overrides: []ec2types.FleetLaunchTemplateOverridesRequest{
				{InstanceType: ec2types.InstanceTypeM5Large, AvailabilityZone: aws.String("us-west-2a")},
			},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand,
		},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
	})
	if err != nil {
		t.Fatalf("CreateFleet: %v", err)
	}
	if len(fleet.Instances) != 1 || len(fleet.Instances[0].InstanceIds) != 1 {
		t.Fatalf("CreateFleet launched %+v (errors %+v), want one instance", fleet.Instances, fleet.Errors)
	}
	id := fleet.Instances[0].InstanceIds[0]
	providerID := "aws:///us-west-2a/" + id

	kc := c.KubeClient
	node := kubeplane.WaitFor(ctx, t, "Ready node for "+id, func() (*corev1.Node, bool, error) {
		nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, false, err
		}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if n.Spec.ProviderID == providerID {
				return n, kubeplane.NodeReady(n), nil
			}
		}
		return nil, false, nil
	})
	if got := node.Labels[corev1.LabelInstanceTypeStable]; got != "m5.large" {
		t.Errorf("node instance-type label %q, want m5.large", got)
	}
	if got := node.Labels["karpenter.sh/nodepool"]; got != "default" {
		t.Errorf("node nodepool label %q, want default (from the user data)", got)
	}
	if pods := node.Status.Allocatable[corev1.ResourcePods]; pods.Value() != 29 {
		t.Errorf("allocatable pods %s, want 29 (maxPods from the user data)", pods.String())
	}

	ns := c.NewNamespace(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: node.Labels[corev1.LabelHostname]},
			Tolerations:  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers:   []corev1.Container{{Name: "app", Image: "app"}},
		},
	}
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	kubeplane.WaitFor(ctx, t, "pod Running on the fleet node", func() (*corev1.Pod, bool, error) {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, "app", metav1.GetOptions{})
		return p, err == nil && p.Status.Phase == corev1.PodRunning && p.Spec.NodeName == node.Name, err
	})

	if _, err := ec2c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatalf("terminate: %v", err)
	}
	kubeplane.WaitFor(ctx, t, "node of the terminated instance deleted", func() (struct{}, bool, error) {
		_, err := kc.CoreV1().Nodes().Get(ctx, node.Name, metav1.GetOptions{})
		return struct{}{}, apierrors.IsNotFound(err), nil
	})
}

// internal/kube's real EKS path: DescribeCluster for endpoint and CA, a
// presigned STS token as the bearer token, checked by kube-apiserver through
// the simulator's token webhook.
func TestEKSTokenAuthenticatesThroughWebhook(t *testing.T) {
	c := shared.Get(t)
	ctx := testCtx(t)
	cfg := awsConfig(t, c)

	out, err := eks.NewFromConfig(cfg).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(c.ClusterName)})
	if err != nil {
		t.Fatalf("DescribeCluster: %v", err)
	}
	if aws.ToString(out.Cluster.Endpoint) != c.Plane.Endpoint {
		t.Fatalf("DescribeCluster endpoint %q, want the local API server %q", aws.ToString(out.Cluster.Endpoint), c.Plane.Endpoint)
	}
	ca, err := base64.StdEncoding.DecodeString(aws.ToString(out.Cluster.CertificateAuthority.Data))
	if err != nil {
		t.Fatalf("decode cluster CA: %v", err)
	}

	client := func(cluster string) kubernetes.Interface {
		pc := sts.NewPresignClient(sts.NewFromConfig(cfg))
		req, err := pc.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(po *sts.PresignOptions) {
			po.ClientOptions = append(po.ClientOptions, sts.WithAPIOptions(func(st *middleware.Stack) error {
				if err := smithyhttp.AddHeaderValue("x-k8s-aws-id", cluster)(st); err != nil {
					return err
				}
				return smithyhttp.AddHeaderValue("X-Amz-Expires", "60")(st)
			}))
		})
		if err != nil {
			t.Fatalf("presign GetCallerIdentity: %v", err)
		}
		token := awssim.EKSTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL))
		kc, err := kubernetes.NewForConfig(&rest.Config{
			Host:            aws.ToString(out.Cluster.Endpoint),
			BearerToken:     token,
			TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		})
		if err != nil {
			t.Fatal(err)
		}
		return kc
	}

	review, err := client(c.ClusterName).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("SelfSubjectReview with an EKS token: %v", err)
	}
	if u := review.Status.UserInfo; u.Username != "arn:aws:iam::111122223333:role/nodewright" || !contains(u.Groups, "system:masters") {
		t.Fatalf("authenticated as %+v, want the simulator's caller role in system:masters", u)
	}
	if _, err := client(c.ClusterName).CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("list nodes with an EKS token: %v", err)
	}
	// A token minted for another cluster is refused.
	_, err = client("some-other-cluster").CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("token for another cluster: got %v, want 401 Unauthorized", err)
	}
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// One full local cloud for the package, started by the first test that
// needs it; short simulated delays so instances turn into nodes quickly.
var shared = cloudtest.NewShared("harness", cloudtest.ShuttingDown(500*time.Millisecond))

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
