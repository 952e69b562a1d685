package aws_test

import (
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// The v1.14 interface fields reach CreateLaunchTemplate over the wire (EC2
// query encoding) and the simulator launches from such a template.
func TestLaunchTemplateCarriesInterfaceSettings(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	nc.Spec.IPPrefixCount = sdkaws.Int32(1)
	nc.Spec.ConnectionTracking = &apis.ConnectionTracking{TCPEstablishedTimeout: sdkaws.Int32(3600), UDPTimeout: sdkaws.Int32(45)}
	nc.Spec.MetadataOptions = &apis.MetadataOptions{HTTPProtocolIPv6: sdkaws.String("enabled")}
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("default-net1", in("karpenter.sh/capacity-type", "on-demand")), NodeClass: nc, InstanceTypes: e.types("m5.large")})
	if err != nil {
		t.Fatal(err)
	}
	lts := e.sim.Calls("ec2", "CreateLaunchTemplate")
	if len(lts) != 1 {
		t.Fatalf("%d CreateLaunchTemplate calls", len(lts))
	}
	p := lts[0].Params
	for k, v := range map[string]string{
		"LaunchTemplateData.NetworkInterface.1.DeviceIndex":                                           "0",
		"LaunchTemplateData.NetworkInterface.1.Ipv4PrefixCount":                                       "1",
		"LaunchTemplateData.NetworkInterface.1.ConnectionTrackingSpecification.TcpEstablishedTimeout": "3600",
		"LaunchTemplateData.NetworkInterface.1.ConnectionTrackingSpecification.UdpTimeout":            "45",
		"LaunchTemplateData.NetworkInterface.1.SecurityGroupId.1":                                     p["LaunchTemplateData.NetworkInterface.1.SecurityGroupId.1"],
		"LaunchTemplateData.MetadataOptions.HttpProtocolIpv6":                                         "enabled",
	} {
		if p[k] != v || v == "" {
			t.Errorf("CreateLaunchTemplate %s=%q, want %q", k, p[k], v)
		}
	}
	if _, ok := p["LaunchTemplateData.SecurityGroupId.1"]; ok {
		t.Error("security groups on the instance as well as on its interface")
	}
	if got, err := e.p.GetInstance(e.ctx, inst.ID); err != nil || got.Type != "m5.large" {
		t.Errorf("instance %+v %v", got, err)
	}
}

// cpuOptions.nestedVirtualization reaches the launch template, and the
// simulator refuses it, as EC2 does, on a type without the feature.
func TestNestedVirtualizationReachesTheInstance(t *testing.T) {
	if awsDataDir() == "" {
		t.Skip("needs ../shared/aws-data (the built-in catalog has no nested-virtualization type)")
	}
	e := newEnv(t, true)
	nc := nodeClass("al2023@latest")
	nc.Spec.CPUOptions = &apis.CPUOptions{NestedVirtualization: sdkaws.String("enabled")}
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("default-nv1", in("karpenter.sh/capacity-type", "on-demand")), NodeClass: nc, InstanceTypes: e.types("m7i.large")})
	if err != nil {
		t.Fatal(err)
	}
	lts := e.sim.Calls("ec2", "CreateLaunchTemplate")
	if len(lts) != 1 || lts[0].Params["LaunchTemplateData.CpuOptions.NestedVirtualization"] != "enabled" {
		t.Fatalf("CreateLaunchTemplate calls %v", lts)
	}
	out, err := e.clients.EC2.DescribeInstances(e.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{inst.ID}})
	if err != nil || len(out.Reservations) != 1 {
		t.Fatalf("describe %v %v", out, err)
	}
	if got := out.Reservations[0].Instances[0].CpuOptions; got == nil || got.NestedVirtualization != ec2types.NestedVirtualizationSpecificationEnabled {
		t.Errorf("instance cpu options %+v", got)
	}
	if _, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("default-nv2", in("karpenter.sh/capacity-type", "on-demand")), NodeClass: nc, InstanceTypes: e.types("m5.large")}); err == nil {
		t.Error("m5.large launched with nested virtualization; EC2 refuses it")
	}
}
