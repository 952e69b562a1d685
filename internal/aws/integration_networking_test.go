package aws_test

import (
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"

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
