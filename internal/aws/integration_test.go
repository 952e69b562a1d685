package aws_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	if testing.Short() {
		t.Skip("integration test: talks to the AWS simulator over HTTP (skipped in -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	dataDir := ""
	if fullCatalog {
		dataDir = awsDataDir()
	}
	sim, err := awssim.New(awssim.Options{ClusterName: testCluster, KubernetesVersion: k8sVersion, Region: testRegion, AWSDataDir: dataDir, Seed: 7,
		Delays: awssim.Delays{Pending: 200 * time.Millisecond, ShuttingDown: 200 * time.Millisecond}})
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
	if strings.Join(resources, ",") != "fleet,instance,network-interface,volume" {
		t.Errorf("tag specifications for %v", resources)
	}
	types, zones := fleetOverrides(fleets[0])
	if strings.Join(types, ",") != "c5.large,m5.large,m5.xlarge" || len(zones) < 2 {
		t.Errorf("overrides types %v zones %v", types, zones)
	}

	// The launch template carries the user data, instance profile and security groups.
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
		lt["LaunchTemplateData.SecurityGroupId.1"] == "" || lt["LaunchTemplateData.SecurityGroupId.2"] == "" ||
		lt["LaunchTemplateData.BlockDeviceMapping.1.DeviceName"] != "/dev/xvda" || lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeSize"] != "20" ||
		lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeType"] != "gp3" || lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.Encrypted"] != "true" ||
		lt["LaunchTemplateData.Monitoring.Enabled"] != "false" || lt["TagSpecification.1.ResourceType"] != "launch-template" {
		t.Errorf("launch template params %v", lt)
	}
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
	subnets, err := e.p.Subnets(e.ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	zonal := nwaws.ZonalSubnets(subnets)
	// m5.large spot has no capacity anywhere.
	for z := range zonal {
		e.sim.EC2().SetCapacity(ec2sim.Pool{InstanceType: "m5.large", Zone: z, CapacityType: "spot"}, 0)
	}
	// A claim that can only be m5.large spot fails with insufficient capacity
	// and leaves every (m5.large, zone, spot) in the ICE set.
	_, err = e.p.Launch(e.ctx, nwaws.LaunchRequest{
		NodeClaim: newClaim("ice-1", in("karpenter.sh/capacity-type", "spot")), NodeClass: nc, InstanceTypes: e.types("m5.large"),
	})
	if !errors.Is(err, nwaws.ErrInsufficientCapacity) {
		t.Fatalf("want ErrInsufficientCapacity, got %v", err)
	}
	for z := range zonal {
		if !e.p.ICE().IsUnavailable("m5.large", z, "spot") {
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
	if e.p.ICE().IsUnavailable("m5.large", inst.Zone, "spot") {
		t.Error("ICE entry outlived 3 minutes")
	}
}

func TestTerminateOnlyOwnedInstances(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("term-1"), NodeClass: nc, InstanceTypes: e.types("c5.large")})
	if err != nil {
		t.Fatal(err)
	}
	// Someone else's instance: launched from the same template, without our tags.
	subnets, _ := e.p.Subnets(e.ctx, nc)
	out, err := e.clients.EC2.CreateFleet(e.ctx, &ec2.CreateFleetInput{
		Type: ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: []ec2types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: sdkaws.String(inst.LaunchTemplate), Version: sdkaws.String("$Latest")},
			Overrides:                   []ec2types.FleetLaunchTemplateOverridesRequest{{InstanceType: "c5.large", SubnetId: sdkaws.String(subnets[0].ID)}},
		}},
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{TotalTargetCapacity: sdkaws.Int32(1), DefaultTargetCapacityType: ec2types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications:           []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{{Key: sdkaws.String("Name"), Value: sdkaws.String("not-ours")}}}},
	})
	if err != nil || len(out.Instances) == 0 {
		t.Fatalf("foreign instance: %v %+v", err, out)
	}
	foreign := out.Instances[0].InstanceIds[0]

	err = e.p.Terminate(e.ctx, foreign, inst.ID, "i-0000000000doesnotexist")
	if !errors.Is(err, nwaws.ErrNotOwned) || !strings.Contains(err.Error(), foreign) {
		t.Fatalf("want ErrNotOwned naming %s, got %v", foreign, err)
	}
	f, err := e.p.GetInstance(e.ctx, foreign)
	if err != nil || (f.State != "pending" && f.State != "running") {
		t.Errorf("foreign instance touched: %v %+v", err, f)
	}
	own, err := e.p.GetInstance(e.ctx, inst.ID)
	if err != nil || (own.State != "shutting-down" && own.State != "terminated") {
		t.Errorf("own instance not terminating: %v %+v", err, own)
	}
	if got := e.sim.Calls("ec2", "TerminateInstances"); len(got) != 1 || got[0].Params["InstanceId.1"] != inst.ID || got[0].Params["InstanceId.2"] != "" {
		t.Errorf("TerminateInstances calls %+v", got)
	}
	// Terminating again is a no-op success.
	if err := e.p.Terminate(e.ctx, inst.ID); err != nil {
		t.Errorf("second terminate: %v", err)
	}
	listed, _ := e.p.ListClusterInstances(e.ctx)
	for _, i := range listed {
		if i.ID == foreign {
			t.Errorf("foreign instance listed as the cluster's")
		}
	}
}

func TestAMIAliasResolution(t *testing.T) {
	e := newEnv(t, false)
	ec2c := e.sim.EC2()
	ssm := func(path string) string {
		v, ok := ec2c.SSMParameter(path)
		if !ok {
			t.Fatalf("simulator has no SSM parameter %s", path)
		}
		return v
	}
	amis, err := e.p.AMIs(e.ctx, nodeClass("al2023@latest"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]nwaws.AMI{}
	for _, a := range amis {
		ids[a.ID] = a
	}
	x86 := ssm("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
	arm := ssm("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id")
	gpu := ssm("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id")
	if ids[x86].Architecture != "amd64" || ids[arm].Architecture != "arm64" || !slices.Contains(ids[gpu].Variants, nwaws.VariantNvidia) {
		t.Fatalf("al2023@latest resolved to %+v", amis)
	}
	old := ids[x86]

	// A new EKS AMI release moves @latest once the cache is refreshed; a
	// pinned version keeps the old image.
	if _, err := ec2c.PublishAMI(ec2sim.FamilyAL2023); err != nil {
		t.Fatal(err)
	}
	e.p.InvalidateDiscovery()
	amis, err = e.p.AMIs(e.ctx, nodeClass("al2023@latest"))
	if err != nil {
		t.Fatal(err)
	}
	newX86 := ssm("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id")
	if newX86 == old.ID || !slices.ContainsFunc(amis, func(a nwaws.AMI) bool { return a.ID == newX86 }) {
		t.Errorf("@latest did not follow the release: %s", newX86)
	}
	version := old.Name[strings.LastIndex(old.Name, "-")+1:] // amazon-eks-node-al2023-...-v20261101
	pinned, err := e.p.AMIs(e.ctx, nodeClass("al2023@"+version))
	if err != nil || !slices.ContainsFunc(pinned, func(a nwaws.AMI) bool { return a.ID == old.ID }) {
		t.Errorf("al2023@%s: %v %+v", version, err, pinned)
	}

	// Bottlerocket and AL2 aliases resolve through their own parameters.
	br, err := e.p.AMIs(e.ctx, nodeClass("bottlerocket@latest"))
	if err != nil || !slices.ContainsFunc(br, func(a nwaws.AMI) bool {
		return a.ID == ssm("/aws/service/bottlerocket/aws-k8s-1.33/arm64/latest/image_id")
	}) {
		t.Errorf("bottlerocket@latest: %v %+v", err, br)
	}
	if _, err := e.p.AMIs(e.ctx, nodeClass("al2@latest")); err != nil {
		t.Errorf("al2@latest: %v", err)
	}
	// An alias with no published parameters is a clear error.
	if _, err := e.p.AMIs(e.ctx, nodeClass("al2023@v19990101")); err == nil || !strings.Contains(err.Error(), "al2023@v19990101") {
		t.Errorf("unknown version: %v", err)
	}

	// Selector terms: by name with wildcard, newest first, deprecated skipped.
	custom := func(name string, created time.Time) ec2types.Image {
		return ec2c.AddImage(ec2types.Image{Name: sdkaws.String(name), Architecture: ec2types.ArchitectureValuesX8664,
			CreationDate: sdkaws.String(created.UTC().Format(time.RFC3339)), Tags: []ec2types.Tag{{Key: sdkaws.String("golden"), Value: sdkaws.String("yes")}}})
	}
	older := custom("golden-node-1", time.Now().Add(-48*time.Hour))
	newer := custom("golden-node-2", time.Now().Add(-24*time.Hour))
	newest := custom("golden-node-3", time.Now().Add(-1*time.Hour))
	if err := ec2c.DeprecateImage(*newest.ImageId, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	nc := nodeClass("")
	nc.Spec.AMISelectorTerms = []apis.AMISelectorTerm{{Name: "golden-node-*", Owner: "self"}}
	got, err := e.p.AMIs(e.ctx, nc)
	if err != nil || len(got) != 1 || got[0].ID != *newer.ImageId {
		t.Errorf("name selector: want only the newest non-deprecated image %s: %v %+v", *newer.ImageId, err, got)
	}
	nc.Spec.AMISelectorTerms = []apis.AMISelectorTerm{{Tags: map[string]string{"golden": "*"}}}
	if got, err := e.p.AMIs(e.ctx, nc); err != nil || len(got) != 1 || got[0].ID != *newer.ImageId {
		t.Errorf("tag selector: %v %+v", err, got)
	}
	// All matching images deprecated: the newest deprecated one is still used.
	if err := ec2c.DeprecateImage(*newer.ImageId, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := ec2c.DeprecateImage(*older.ImageId, time.Now().Add(-time.Minute)); err != nil {
		t.Fatal(err)
	}
	e.p.InvalidateDiscovery()
	if got, err := e.p.AMIs(e.ctx, nc); err != nil || len(got) != 1 || got[0].ID != *newest.ImageId || !got[0].Deprecated {
		t.Errorf("all deprecated: %v %+v", err, got)
	}
	nc.Spec.AMISelectorTerms = []apis.AMISelectorTerm{{ID: *older.ImageId}}
	if got, err := e.p.AMIs(e.ctx, nc); err != nil || len(got) != 1 || got[0].ID != *older.ImageId {
		t.Errorf("id selector: %v %+v", err, got)
	}
}

func TestDiscovery(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	subnets, err := e.p.Subnets(e.ctx, nc)
	if err != nil {
		t.Fatal(err)
	}
	zonal := nwaws.ZonalSubnets(subnets)
	zones := e.sim.EC2().Config().Catalog.Zones()
	if len(zones) < 2 || len(subnets) != len(zones) || len(zonal) != len(zones) {
		t.Fatalf("want the %d private subnets, one per zone: %+v", len(zones), subnets)
	}
	for _, s := range subnets {
		if !strings.Contains(s.Tags["Name"], "private") {
			t.Errorf("public subnet selected: %+v", s)
		}
	}
	wild := nodeClass("al2023@latest")
	wild.Spec.SubnetSelectorTerms = []apis.SubnetSelectorTerm{{Tags: map[string]string{"Name": "demo-public-*"}}, {ID: subnets[0].ID}}
	got, err := e.p.Subnets(e.ctx, wild)
	if err != nil || len(got) != len(zones)+1 {
		t.Errorf("wildcard + id selector: %v %+v", err, got)
	}
	groups, err := e.p.SecurityGroups(e.ctx, nc)
	if err != nil || len(groups) != 2 {
		t.Fatalf("security groups by tag: %v %+v", err, groups)
	}
	byName := nodeClass("al2023@latest")
	other := groups[0]
	if other.Name == "demo-node" {
		other = groups[1]
	}
	byName.Spec.SecurityGroupSelectorTerms = []apis.SecurityGroupSelectorTerm{{Name: "demo-node"}, {ID: other.ID}}
	if got, err := e.p.SecurityGroups(e.ctx, byName); err != nil || len(got) != 2 {
		t.Errorf("security groups by name and id: %v %+v", err, got)
	}
	none := nodeClass("al2023@latest")
	none.Spec.SubnetSelectorTerms = []apis.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "other"}}}
	if _, err := e.p.Subnets(e.ctx, none); !errors.Is(err, nwaws.ErrNodeClassNotReady) {
		t.Errorf("no subnets: %v", err)
	}
	// Cached: a second resolution makes no EC2 call.
	before := len(e.sim.Calls("ec2", "DescribeSubnets"))
	if _, err := e.p.Subnets(e.ctx, nc); err != nil || len(e.sim.Calls("ec2", "DescribeSubnets")) != before {
		t.Errorf("subnets not cached: %v", err)
	}
	// ... until the TTL passes.
	e.clock.Advance(2 * time.Minute)
	if _, err := e.p.Subnets(e.ctx, nc); err != nil || len(e.sim.Calls("ec2", "DescribeSubnets")) != before+1 {
		t.Errorf("subnets not refreshed after the TTL: %v", err)
	}

	info, err := e.p.Cluster(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	dns, err := info.DNSIP()
	if info.Endpoint != "https://127.0.0.1:6443" || info.Version != k8sVersion || info.CABundle != base64.StdEncoding.EncodeToString(testCA) || err != nil || dns == "" {
		t.Errorf("cluster info %+v dns %s %v", info, dns, err)
	}
}

func TestPricesAndCatalog(t *testing.T) {
	e := newEnv(t, true)
	store := &memPrices{}
	snap, err := e.p.Prices(e.ctx, store, false)
	if err != nil {
		t.Fatal(err)
	}
	if snap.OnDemandSource != catalog.PriceSourcePricingAPI || len(snap.OnDemand) < 10 {
		t.Fatalf("on-demand from %s: %d prices", snap.OnDemandSource, len(snap.OnDemand))
	}
	if want, _ := e.sim.EC2().OnDemandPrice("m5.large"); snap.OnDemand["m5.large"] != want {
		t.Errorf("m5.large on-demand %v, want %v", snap.OnDemand["m5.large"], want)
	}
	if pages, want := len(e.sim.Calls("pricing", "GetProducts")), (len(snap.OnDemand)+99)/100; pages != want {
		t.Errorf("GetProducts: %d pages for %d prices, want %d", pages, len(snap.OnDemand), want)
	}
	if want, _ := e.sim.EC2().SpotPrice("m5.large", "us-west-2a"); snap.Spot["m5.large"]["us-west-2a"] != want || snap.SpotSource != catalog.PriceSourcePricingAPI {
		t.Errorf("m5.large spot %v from %s, want %v", snap.Spot["m5.large"]["us-west-2a"], snap.SpotSource, want)
	}
	if store.saved == nil {
		t.Fatal("snapshot not saved")
	}
	// Within 12 hours the cached snapshot is used.
	calls := len(e.sim.Calls("pricing", "GetProducts"))
	if _, err := e.p.Prices(e.ctx, store, false); err != nil || len(e.sim.Calls("pricing", "GetProducts")) != calls {
		t.Errorf("prices refetched within the refresh interval: %v", err)
	}
	// After 12 hours prices are fetched again, and a changed spot price shows.
	e.sim.EC2().SetSpotPrice("m5.large", "us-west-2a", 0.0123)
	e.clock.Advance(12*time.Hour + time.Minute)
	snap, err = e.p.Prices(e.ctx, store, false)
	if err != nil || snap.Spot["m5.large"]["us-west-2a"] != 0.0123 || len(e.sim.Calls("pricing", "GetProducts")) == calls {
		t.Errorf("refresh after 12h: %v %v", err, snap.Spot["m5.large"])
	}
	// Pricing API unreachable: the cached on-demand prices stay.
	remove := e.sim.InjectFault(awssim.Fault{Service: "pricing", Code: "AccessDeniedException", Message: "no route to the Pricing API"})
	snap, err = e.p.Prices(e.ctx, store, true)
	if err != nil || snap.OnDemandSource != catalog.PriceSourcePricingAPI || snap.OnDemand["m5.large"] == 0 {
		t.Errorf("stale fallback: %v %+v", err, snap.OnDemandSource)
	}
	// ... and with no cache, the embedded catalog's list prices.
	snap, err = e.p.Prices(e.ctx, &memPrices{}, true)
	if err != nil || snap.OnDemandSource != catalog.PriceSourceEmbedded || snap.OnDemand["m5.large"] == 0 {
		t.Errorf("embedded fallback: %v %+v", err, snap)
	}
	remove()

	cat, err := e.p.Catalog(e.ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	m5, ok := cat.Get("m5.large")
	if !ok || len(cat.Zones) != len(e.sim.EC2().Config().Catalog.Zones()) || m5.VCPU != 2 {
		t.Fatalf("catalog: %v zones %v", ok, cat.Zones)
	}
	o, ok := m5.Offering("us-west-2a", "spot")
	if !ok || o.Price != 0.0123 || !o.Available || o.ZoneID == "" {
		t.Errorf("m5.large spot offering %+v", o)
	}
	// ICE marks reach the catalog through ApplyICE.
	_ = e.p.ICE().MarkUnavailable(e.ctx, nwaws.OfferingKey{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}, "test")
	iced, err := e.p.ApplyICE(cat)
	if err != nil {
		t.Fatal(err)
	}
	m5i, _ := iced.Get("m5.large")
	if o, _ := m5i.Offering("us-west-2a", "spot"); o.Available {
		t.Error("ApplyICE left the offering available")
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

type memPrices struct{ saved *nwaws.PriceSnapshot }

func (m *memPrices) LoadPrices(_ context.Context, region string) (*nwaws.PriceSnapshot, error) {
	if m.saved == nil || m.saved.Region != region {
		return nil, nil
	}
	cp := *m.saved
	return &cp, nil
}

func (m *memPrices) SavePrices(_ context.Context, s *nwaws.PriceSnapshot) error {
	cp := *s
	m.saved = &cp
	return nil
}

func TestLaunchTemplateGarbageCollection(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	a, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("gc-1"), NodeClass: nc, InstanceTypes: e.types("c5.large")})
	if err != nil {
		t.Fatal(err)
	}
	nc2 := nodeClass("al2023@latest")
	nc2.Spec.Tags = map[string]string{"team": "search"}
	nc2.Spec.DetailedMonitoring = sdkaws.Bool(true)
	nc2.Spec.AssociatePublicIPAddress = sdkaws.Bool(false)
	size := resource.MustParse("100Gi")
	nc2.Spec.BlockDeviceMappings = []*apis.BlockDeviceMapping{{DeviceName: sdkaws.String("/dev/xvda"), RootVolume: true,
		EBS: &apis.BlockDevice{VolumeSize: &size, VolumeType: sdkaws.String("io2"), IOPS: sdkaws.Int64(4000)}}}
	b, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("gc-2"), NodeClass: nc2, InstanceTypes: e.types("c5.large")})
	if err != nil {
		t.Fatal(err)
	}
	created := e.sim.Calls("ec2", "CreateLaunchTemplate")
	lt := created[len(created)-1].Params
	if lt["LaunchTemplateData.Monitoring.Enabled"] != "true" || lt["LaunchTemplateData.NetworkInterface.1.AssociatePublicIpAddress"] != "false" ||
		lt["LaunchTemplateData.NetworkInterface.1.SecurityGroupId.1"] == "" || lt["LaunchTemplateData.SecurityGroupId.1"] != "" ||
		lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeSize"] != "100" || lt["LaunchTemplateData.BlockDeviceMapping.1.Ebs.Iops"] != "4000" {
		t.Errorf("EC2NodeClass settings not in the launch template: %v", lt)
	}
	if a.LaunchTemplate == b.LaunchTemplate {
		t.Fatal("different EC2NodeClass specs share a launch template")
	}
	// A template someone else made, even tagged for this cluster, is never ours to delete.
	if _, err := e.clients.EC2.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: sdkaws.String("team-made-template"),
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: sdkaws.String(a.ImageID)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate,
			Tags: []ec2types.Tag{{Key: sdkaws.String(nwaws.TagClusterName), Value: sdkaws.String(testCluster)}}}},
	}); err != nil {
		t.Fatal(err)
	}
	lts, err := e.p.LaunchTemplates(e.ctx)
	if err != nil || len(lts) != 2 {
		t.Fatalf("launch templates %v %+v", err, lts)
	}
	// Young templates are kept even when unused.
	if del, err := e.p.DeleteUnusedLaunchTemplates(e.ctx, func(string) bool { return false }, time.Hour); err != nil || len(del) != 0 {
		t.Errorf("young templates deleted: %v %v", err, del)
	}
	e.clock.Advance(2 * time.Hour)
	del, err := e.p.DeleteUnusedLaunchTemplates(e.ctx, func(n string) bool { return n == a.LaunchTemplate }, time.Hour)
	if err != nil || len(del) != 1 || del[0] != b.LaunchTemplate {
		t.Fatalf("deleted %v %v", del, err)
	}
	if out, err := e.clients.EC2.DescribeLaunchTemplates(e.ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{"team-made-template"}}); err != nil || len(out.LaunchTemplates) != 1 {
		t.Errorf("foreign launch template touched: %v", err)
	}
	// Launching the deleted shape again recreates its template.
	if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("gc-3"), NodeClass: nc2, InstanceTypes: e.types("c5.large")}); err != nil {
		t.Fatalf("launch after GC: %v", err)
	}
	if lts, _ := e.p.LaunchTemplates(e.ctx); len(lts) != 2 {
		t.Errorf("template not recreated: %+v", lts)
	}
}

func TestDrift(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	launched, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("drift-1"), NodeClass: nc, InstanceTypes: e.types("c5.large")})
	if err != nil {
		t.Fatal(err)
	}
	inst, err := e.p.GetInstance(e.ctx, launched.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(inst.SecurityGroupIDs) != 2 || inst.SubnetID == "" {
		t.Fatalf("described instance lacks network facts: %+v", inst)
	}
	if reason, err := e.p.Drift(e.ctx, nc, inst); err != nil || reason != "" {
		t.Fatalf("fresh instance drifted: %q %v", reason, err)
	}
	// Security groups: select only one of the two.
	sgs := nodeClass("al2023@latest")
	sgs.Spec.SecurityGroupSelectorTerms = []apis.SecurityGroupSelectorTerm{{Name: "demo-node"}}
	if reason, err := e.p.Drift(e.ctx, sgs, inst); err != nil || reason != nwaws.DriftSecurityGroup {
		t.Errorf("security group drift: %q %v", reason, err)
	}
	// Subnets: select a different zone's subnet only.
	subnets, _ := e.p.Subnets(e.ctx, nc)
	other := nodeClass("al2023@latest")
	for _, s := range subnets {
		if s.ID != inst.SubnetID {
			other.Spec.SubnetSelectorTerms = []apis.SubnetSelectorTerm{{ID: s.ID}}
			break
		}
	}
	if reason, err := e.p.Drift(e.ctx, other, inst); err != nil || reason != nwaws.DriftSubnet {
		t.Errorf("subnet drift: %q %v", reason, err)
	}
	// AMI: a new release moves al2023@latest.
	if _, err := e.sim.EC2().PublishAMI(ec2sim.FamilyAL2023); err != nil {
		t.Fatal(err)
	}
	e.p.InvalidateDiscovery()
	if reason, err := e.p.Drift(e.ctx, nc, inst); err != nil || reason != nwaws.DriftAMI {
		t.Errorf("AMI drift: %q %v", reason, err)
	}
	// A class that resolves to nothing is an error, not drift.
	broken := nodeClass("al2023@latest")
	broken.Spec.SubnetSelectorTerms = []apis.SubnetSelectorTerm{{Tags: map[string]string{"nope": "nope"}}}
	if _, err := e.p.Drift(e.ctx, broken, inst); !errors.Is(err, nwaws.ErrNodeClassNotReady) {
		t.Errorf("unresolvable class: %v", err)
	}
}

// TestConcurrentLaunches: the provisioner launches a pass's claims at once;
// they must share discovery and launch templates and each get one instance.
func TestConcurrentLaunches(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	types := e.types("c5.large", "m5.large")
	const n = 12
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim(fmt.Sprintf("burst-%d", i), in("karpenter.sh/capacity-type", "on-demand")), NodeClass: nc, InstanceTypes: types})
			ids[i], errs[i] = inst.ID, err
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil || ids[i] == "" || seen[ids[i]] {
			t.Fatalf("launch %d: %q %v", i, ids[i], errs[i])
		}
		seen[ids[i]] = true
	}
	if got := len(e.sim.Calls("ec2", "CreateFleet")); got != n {
		t.Errorf("%d CreateFleet calls for %d claims", got, n)
	}
	if lts, err := e.p.LaunchTemplates(e.ctx); err != nil || len(lts) != 1 {
		t.Errorf("launch templates after a burst: %v %+v", err, lts)
	}
}

// lossyEC2 performs CreateFleet but loses the response, as a Lambda killed
// (or a connection reset) right after the call would.
type lossyEC2 struct {
	nwaws.EC2API
	lose int
	// blind hides every instance from DescribeInstances, as EC2's eventual
	// consistency can right after a launch.
	blind bool
}

func (l *lossyEC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, o ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if l.blind {
		return &ec2.DescribeInstancesOutput{}, nil
	}
	return l.EC2API.DescribeInstances(ctx, in, o...)
}

func (l *lossyEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, o ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	out, err := l.EC2API.CreateFleet(ctx, in, o...)
	if err == nil && l.lose > 0 {
		l.lose--
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return out, err
}

func TestRelaunchAfterLostResponseLaunchesOnce(t *testing.T) {
	e := newEnv(t, false)
	clients := e.clients
	clients.EC2 = &lossyEC2{EC2API: e.clients.EC2, lose: 1}
	p, err := nwaws.New(nwaws.Options{ClusterName: testCluster, Region: testRegion, Owner: testOwner, Logger: quiet}, clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := nwaws.LaunchRequest{NodeClaim: newClaim("lossy-1"), NodeClass: nodeClass("bottlerocket@latest"), InstanceTypes: e.types("c5.large", "m5.large")}
	if _, err := p.Launch(e.ctx, req); err == nil {
		t.Fatal("lost response not reported")
	}
	inst, err := p.Launch(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.sim.EC2().Instances()); n != 1 {
		t.Fatalf("%d instances after a lost response and a re-launch, want 1", n)
	}
	if inst.ID != *e.sim.EC2().Instances()[0].InstanceId {
		t.Errorf("re-launch returned %s, not the instance launched first", inst.ID)
	}
	// The Bottlerocket user data went over the wire as TOML with the cluster settings.
	lt := e.sim.Calls("ec2", "CreateLaunchTemplate")[0].Params
	raw, _ := base64.StdEncoding.DecodeString(lt["LaunchTemplateData.UserData"])
	for _, want := range []string{"[settings.kubernetes]", `cluster-name = "demo"`, `"karpenter.sh/unregistered" = [":NoExecute"]`, "max-pods = 29"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("Bottlerocket user data lacks %q:\n%s", want, raw)
		}
	}
	if want, _ := e.sim.EC2().SSMParameter("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id"); inst.ImageID != want {
		t.Errorf("image %s, want the Bottlerocket x86_64 image %s", inst.ImageID, want)
	}
}

// TestRelaunchBeforeInstanceIsVisible: the adoption check cannot see the
// instance yet, so the CreateFleet ClientToken must return the same one.
func TestRelaunchBeforeInstanceIsVisible(t *testing.T) {
	e := newEnv(t, false)
	clients := e.clients
	lossy := &lossyEC2{EC2API: e.clients.EC2, lose: 1, blind: true}
	clients.EC2 = lossy
	p, err := nwaws.New(nwaws.Options{ClusterName: testCluster, Region: testRegion, Owner: testOwner, Logger: quiet}, clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := nwaws.LaunchRequest{NodeClaim: newClaim("blind-1"), NodeClass: nodeClass("al2023@latest"), InstanceTypes: e.types("c5.large")}
	if _, err := p.Launch(e.ctx, req); err == nil {
		t.Fatal("lost response not reported")
	}
	inst, err := p.Launch(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	fleets := e.sim.Calls("ec2", "CreateFleet")
	if n := len(e.sim.EC2().Instances()); n != 1 || len(fleets) != 2 || fleets[0].Params["ClientToken"] != fleets[1].Params["ClientToken"] {
		t.Fatalf("%d instances from %d CreateFleet calls, want 1 instance from one token", n, len(fleets))
	}
	if inst.ID != *e.sim.EC2().Instances()[0].InstanceId {
		t.Errorf("re-launch returned %s, not the instance launched first", inst.ID)
	}
}
