package aws_test

import (
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/aws/userdata"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

const (
	testCluster = "demo"
	testRegion  = "us-west-2"
	// testOwner is the owner value of the tests' stack (settings.Owner).
	testOwner  = "arn:aws:dynamodb:us-west-2:111122223333:table/aws-tests"
	k8sVersion = "1.33"
)

// quiet keeps the provider's logs out of test output; tests assert on results.
var quiet = slog.New(slog.DiscardHandler)

// testCA is a syntactically valid PEM block; nothing verifies it in these tests.
var testCA = []byte("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUUnodewright\n-----END CERTIFICATE-----\n")

type env struct {
	t       testing.TB
	ctx     context.Context
	sim     *awssim.Server
	p       *nwaws.Provider
	clients nwaws.Clients
	clock   *cloudtest.Clock
}

// awsDataDir is ../shared/aws-data (1,300+ real instance types, so paginated
// calls really page) when the checkout has it, else "" (the simulator's
// small built-in catalog).
func awsDataDir() string {
	dir := filepath.Join("..", "..", "..", "shared", "aws-data")
	if _, err := os.Stat(filepath.Join(dir, "instance-types.json.gz")); err != nil {
		return ""
	}
	return dir
}

// newEnv starts a simulator and a Provider whose SDK clients reach it only
// through the standard AWS_ENDPOINT_URL override. fullCatalog loads the real
// instance types when ../shared has them; otherwise the simulator's small
// built-in catalog keeps launch tests fast.
func newEnv(t testing.TB, fullCatalog bool) *env {
	t.Helper()
	return newEnvWith(t, fullCatalog, nil)
}

// newEnvWith is newEnv with the simulator's options changed by mod.
func newEnvWith(t testing.TB, fullCatalog bool, mod func(*awssim.Options)) *env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: talks to the AWS simulator over HTTP (skipped in -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dataDir := ""
	if fullCatalog {
		dataDir = awsDataDir()
	}
	opts := awssim.Options{ClusterName: testCluster, KubernetesVersion: k8sVersion, Region: testRegion, AWSDataDir: dataDir, Seed: 7,
		Delays: awssim.Delays{Pending: 200 * time.Millisecond, ShuttingDown: 200 * time.Millisecond}}
	if mod != nil {
		mod(&opts)
	}
	sim, err := awssim.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	sim.SetEKSCluster("https://127.0.0.1:6443", testCA, k8sVersion)

	none := filepath.Join(t.TempDir(), "none")
	for k, v := range map[string]string{
		"AWS_ENDPOINT_URL": sim.URL(), "AWS_ACCESS_KEY_ID": awssim.DefaultAccessKeyID,
		"AWS_SECRET_ACCESS_KEY": awssim.DefaultSecretAccessKey, "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_CONFIG_FILE": none, "AWS_SHARED_CREDENTIALS_FILE": none, "AWS_EC2_METADATA_DISABLED": "true",
	} {
		t.Setenv(k, v)
	}
	clients, _, err := nwaws.NewClients(ctx, testRegion)
	if err != nil {
		t.Fatal(err)
	}
	c := &cloudtest.Clock{}
	p, err := nwaws.New(nwaws.Options{ClusterName: testCluster, Region: testRegion, Owner: testOwner, Now: c.Now, Logger: quiet}, clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, ctx: ctx, sim: sim, p: p, clients: clients, clock: c}
}

func nodeClass(alias string) *apis.EC2NodeClass {
	return &apis.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: apis.EC2NodeClassSpec{
			SubnetSelectorTerms:        []apis.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			SecurityGroupSelectorTerms: []apis.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": testCluster}}},
			AMISelectorTerms:           []apis.AMISelectorTerm{{Alias: alias}},
			Role:                       "KarpenterNodeRole-" + testCluster,
			Tags:                       map[string]string{"team": "payments"},
		},
	}
}

func newClaim(name string, reqs ...apis.NodeSelectorRequirementWithMinValues) *apis.NodeClaim {
	return &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apis.NodePoolLabelKey: "default"}},
		Spec: apis.NodeClaimSpec{
			Requirements:  reqs,
			Taints:        []corev1.Taint{{Key: "dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule}},
			StartupTaints: []corev1.Taint{{Key: "example.com/agent", Effect: corev1.TaintEffectNoExecute}},
			NodeClassRef:  &apis.NodeClassReference{Name: "default"},
		},
	}
}

func in(key string, vals ...string) apis.NodeSelectorRequirementWithMinValues {
	return apis.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: vals}
}

// types returns the named instance types from the provider's catalog.
func (e *env) types(names ...string) []*catalog.InstanceType {
	e.t.Helper()
	cat, err := e.p.Catalog(e.ctx, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*catalog.InstanceType
	for _, n := range names {
		it, ok := cat.Get(n)
		if !ok {
			e.t.Fatalf("catalog has no %s", n)
		}
		out = append(out, it)
	}
	return out
}

// fleetOverrides returns the instance types and zones of every override of
// one recorded CreateFleet call, as sent over the wire.
// launch launches the claim's instance from the given types, failing the
// test on error.
func (e *env) launch(t testing.TB, claim string, nc *apis.EC2NodeClass, types ...string) nwaws.Instance {
	t.Helper()
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim(claim), NodeClass: nc, InstanceTypes: e.types(types...)})
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// subnets resolves the node class's subnets, failing the test on error.
func (e *env) subnets(t testing.TB, nc *apis.EC2NodeClass) []nwaws.Subnet {
	t.Helper()
	subnets, err := e.p.Subnets(e.ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	return subnets
}

func fleetOverrides(c awssim.Call) (types, zones []string) {
	for k, v := range c.Params {
		if strings.Contains(k, ".Overrides.") && strings.HasSuffix(k, ".InstanceType") && !slices.Contains(types, v) {
			types = append(types, v)
		}
		if strings.Contains(k, ".Overrides.") && strings.HasSuffix(k, ".AvailabilityZone") && !slices.Contains(zones, v) {
			zones = append(zones, v)
		}
	}
	slices.Sort(types)
	slices.Sort(zones)
	return types, zones
}

func TestLaunchOverTheWire(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	claim := newClaim("default-x7k2p", in("karpenter.sh/capacity-type", "on-demand"))
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large", "m5.xlarge", "c5.large")})
	if err != nil {
		t.Fatal(err)
	}
	// on-demand lowest-price: c5.large is the cheapest of the three.
	if inst.Type != "c5.large" || inst.CapacityType != "on-demand" || inst.Zone == "" || inst.ImageID == "" || !strings.HasPrefix(inst.LaunchTemplate, "nodewright/demo/") {
		t.Fatalf("launched %+v", inst)
	}
	// The instance goes from pending to running.
	var got nwaws.Instance
	for deadline := time.Now().Add(10 * time.Second); ; {
		if got, err = e.p.GetInstance(e.ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
		if got.State == "running" || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got.State != "running" || got.PrivateIP == "" {
		t.Fatalf("instance %s is %s (ip %q), want running", got.ID, got.State, got.PrivateIP)
	}
	for k, v := range map[string]string{
		"kubernetes.io/cluster/demo": "owned", "eks:eks-cluster-name": "demo", "karpenter.sh/nodepool": "default",
		"karpenter.sh/nodeclaim": claim.Name, "nodewright.io/ec2nodeclass": "default", "Name": claim.Name, "team": "payments",
		"nodewright.io/managed-by": "nodewright",
	} {
		if got.Tags[k] != v {
			t.Errorf("instance tag %s=%q, want %q", k, got.Tags[k], v)
		}
	}
	if got.ImageID != inst.ImageID || got.Zone != inst.Zone || got.Type != "c5.large" {
		t.Errorf("described %+v, launched %+v", got, inst)
	}
	inst.Record(claim, metav1.Now())
	if claim.Status.ProviderID != "aws:///"+got.Zone+"/"+got.ID || claim.Labels["topology.k8s.aws/zone-id"] == "" || claim.Annotations[nwaws.AnnotationLaunchTemplate] != inst.LaunchTemplate {
		t.Errorf("recorded claim %+v %+v", claim.ObjectMeta, claim.Status)
	}
	// The AMI is the one the SSM alias names for x86_64 standard.
	want, _ := e.sim.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
	if inst.ImageID != want {
		t.Errorf("image %s, want %s from SSM", inst.ImageID, want)
	}

	fleets := e.sim.Calls("ec2", "CreateFleet")
	if len(fleets) != 1 {
		t.Fatalf("%d CreateFleet calls", len(fleets))
	}
	f := fleets[0].Params
	for k, v := range map[string]string{
		"Type": "instant", "TargetCapacitySpecification.TotalTargetCapacity": "1",
		"TargetCapacitySpecification.DefaultTargetCapacityType": "on-demand", "OnDemandOptions.AllocationStrategy": "lowest-price",
		"ClientToken": nwaws.ClientToken(testCluster, claim.Name, 0),
	} {
		if f[k] != v {
			t.Errorf("CreateFleet %s=%q, want %q", k, f[k], v)
		}
	}
	var resources []string
	for k, v := range f {
		if strings.HasPrefix(k, "TagSpecification.") && strings.HasSuffix(k, ".ResourceType") {
			resources = append(resources, v)
		}
	}
	slices.Sort(resources)
	// What an instant fleet can tag; its network interfaces take their tags
	// from the launch template (checked below).
	if strings.Join(resources, ",") != "fleet,instance,volume" {
		t.Errorf("tag specifications for %v, want fleet, instance and volume", resources)
	}
	types, zones := fleetOverrides(fleets[0])
	if strings.Join(types, ",") != "c5.large,m5.large,m5.xlarge" || len(zones) < 2 {
		t.Errorf("overrides types %v zones %v", types, zones)
	}

	// The launch template carries the user data, instance profile and
	// security groups (on the primary interface, as Karpenter's do).
	// m5.large and c5.large (29 pods) share one; m5.xlarge (58 pods) has its own.
	lts := e.sim.Calls("ec2", "CreateLaunchTemplate")
	if len(lts) != 2 {
		t.Fatalf("%d CreateLaunchTemplate calls, want one per max-pods group", len(lts))
	}
	var lt map[string]string
	for _, c := range lts {
		if c.Params["LaunchTemplateName"] == inst.LaunchTemplate {
			lt = c.Params
		}
	}
	if lt["LaunchTemplateName"] != inst.LaunchTemplate || lt["LaunchTemplateData.ImageId"] != inst.ImageID ||
		lt["LaunchTemplateData.IamInstanceProfile.Name"] != "nodewright-demo-KarpenterNodeRole-demo" ||
		lt["LaunchTemplateData.MetadataOptions.HttpTokens"] != "required" || lt["LaunchTemplateData.MetadataOptions.HttpPutResponseHopLimit"] != "2" ||
		lt["LaunchTemplateData.NetworkInterface.1.SecurityGroupId.1"] == "" || lt["LaunchTemplateData.NetworkInterface.1.SecurityGroupId.2"] == "" ||
		lt["LaunchTemplateData.NetworkInterface.1.DeviceIndex"] != "0" || lt["LaunchTemplateData.SecurityGroupId.1"] != "" ||
		lt["LaunchTemplateData.BlockDeviceMapping.1.DeviceName"] != "/dev/xvda" || lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeSize"] != "20" ||
		lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeType"] != "gp3" || lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.Encrypted"] != "true" ||
		lt["LaunchTemplateData.Monitoring.Enabled"] != "false" || lt["TagSpecification.1.ResourceType"] != "launch-template" {
		t.Errorf("launch template params %v", lt)
	}
	checkTemplateResourceTags(t, lt, false)
	raw, err := base64.StdEncoding.DecodeString(lt["LaunchTemplateData.UserData"])
	if err != nil {
		t.Fatal(err)
	}
	parts, err := userdata.ParseMIME(string(raw))
	if err != nil {
		t.Fatalf("user data is not MIME: %v\n%s", err, raw)
	}
	nodeConfig := parts[len(parts)-1].Content
	for _, want := range []string{
		"kind: NodeConfig", "name: demo", "apiServerEndpoint: https://127.0.0.1:6443",
		"certificateAuthority: " + base64.StdEncoding.EncodeToString(testCA),
		"key: karpenter.sh/unregistered", "key: dedicated", "key: example.com/agent",
		"karpenter.sh/capacity-type=on-demand", "karpenter.sh/nodepool=default",
		"maxPods: 29", "clusterDNS:\n      - " + dnsIP(t, e),
	} {
		if !strings.Contains(nodeConfig, want) {
			t.Errorf("NodeConfig lacks %q:\n%s", want, nodeConfig)
		}
	}

	// Re-launching the same claim (a crash after CreateFleet) adopts the instance.
	again, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if err != nil || again.ID != inst.ID {
		t.Fatalf("re-launch: %v %+v", err, again)
	}
	if n := len(e.sim.Calls("ec2", "CreateFleet")); n != 1 {
		t.Errorf("re-launch called CreateFleet again (%d calls)", n)
	}
	// A second claim with the same shape reuses the launch template.
	if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("default-second", in("karpenter.sh/capacity-type", "on-demand")), NodeClass: nc, InstanceTypes: e.types("c5.large")}); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sim.Calls("ec2", "CreateLaunchTemplate")); n != 2 {
		t.Errorf("launch template not reused: %d created", n)
	}

	listed, err := e.p.ListClusterInstances(e.ctx)
	if err != nil || len(listed) != 2 || listed[0].NodeClaim != claim.Name {
		t.Errorf("cluster instances: %v %+v", err, listed)
	}
}

func TestSpotLaunchUsesPriceCapacityOptimized(t *testing.T) {
	e := newEnv(t, false)
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("spot-1"), NodeClass: nodeClass("al2023@latest"), InstanceTypes: e.types("m5.large", "m6g.large")})
	if err != nil {
		t.Fatal(err)
	}
	if inst.CapacityType != "spot" {
		t.Fatalf("capacity type %s, want spot", inst.CapacityType)
	}
	f := e.sim.Calls("ec2", "CreateFleet")[0].Params
	if f["SpotOptions.AllocationStrategy"] != "price-capacity-optimized" || f["TargetCapacitySpecification.DefaultTargetCapacityType"] != "spot" {
		t.Errorf("spot fleet params %v", f)
	}
	// Two architectures -> two launch templates (one per AMI) in one fleet.
	if f["LaunchTemplateConfigs.2.LaunchTemplateSpecification.LaunchTemplateName"] == "" || len(e.sim.Calls("ec2", "CreateLaunchTemplate")) != 2 {
		t.Errorf("want one launch template per architecture: %v", f)
	}
}

func TestInsufficientCapacityMovesToAnotherOffering(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	zonal := nwaws.ZonalSubnets(e.subnets(t, nc))
	// m5.large spot has no capacity anywhere.
	for z := range zonal {
		e.sim.EC2().SetCapacity(ec2sim.Pool{InstanceType: "m5.large", Zone: z, CapacityType: "spot"}, 0)
	}
	// A claim that can only be m5.large spot fails with insufficient capacity
	// and leaves every (m5.large, zone, spot) in the ICE set.
	_, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{
		NodeClaim: newClaim("ice-1", in("karpenter.sh/capacity-type", "spot")), NodeClass: nc, InstanceTypes: e.types("m5.large"),
	})
	if !errors.Is(err, nwaws.ErrInsufficientCapacity) {
		t.Fatalf("want ErrInsufficientCapacity, got %v", err)
	}
	for z := range zonal {
		if !e.p.ICE().IsUnavailable(nwaws.OfferingKey{InstanceType: "m5.large", Zone: z, CapacityType: "spot"}) {
			t.Errorf("m5.large/%s/spot not marked unavailable", z)
		}
	}
	// The next launch with more options never asks for m5.large spot.
	before := len(e.sim.Calls("ec2", "CreateFleet"))
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{
		NodeClaim: newClaim("ice-2", in("karpenter.sh/capacity-type", "spot")), NodeClass: nc, InstanceTypes: e.types("m5.large", "m5.xlarge"),
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := e.sim.Calls("ec2", "CreateFleet")
	if inst.Type != "m5.xlarge" || len(calls) != before+1 {
		t.Fatalf("launched %s with %d fleet calls", inst.Type, len(calls)-before)
	}
	if types, _ := fleetOverrides(calls[len(calls)-1]); slices.Contains(types, "m5.large") {
		t.Errorf("fleet still offered m5.large: %v", types)
	}
	// A claim allowing on-demand falls back to it in the same Launch.
	inst, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("ice-3"), NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if err != nil || inst.CapacityType != "on-demand" || inst.Type != "m5.large" {
		t.Fatalf("fallback to on-demand: %v %+v", err, inst)
	}
	// After the TTL the offerings come back.
	e.clock.Advance(3*time.Minute + time.Second)
	if e.p.ICE().IsUnavailable(nwaws.OfferingKey{InstanceType: "m5.large", Zone: inst.Zone, CapacityType: "spot"}) {
		t.Error("ICE entry outlived 3 minutes")
	}
}

func dnsIP(t testing.TB, e *env) string {
	info, err := e.p.Cluster(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	ip, err := info.DNSIP()
	if err != nil {
		t.Fatal(err)
	}
	return ip
}
