package aws

import (
	"testing"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis"
)

func TestNetworkInterfaceRequests(t *testing.T) {
	groups := []string{"sg-1"}
	// Nothing asks for an interface: the primary one carries the groups
	// (Karpenter's shape; the fleet's override names the subnet).
	plain := templateSpec{Cluster: "c", SecurityGroupIDs: groups}
	if got := networkInterfaceRequests(plain); len(got) != 1 || sdkaws.ToInt32(got[0].DeviceIndex) != 0 || len(got[0].Groups) != 1 ||
		got[0].Ipv4PrefixCount != nil || got[0].AssociatePublicIpAddress != nil || got[0].ConnectionTrackingSpecification != nil {
		t.Errorf("plain: %+v", got)
	}

	prefixed := plain
	prefixed.IPPrefixCount = sdkaws.Int32(2)
	prefixed.ConnectionTracking = &apis.ConnectionTracking{UDPTimeout: sdkaws.Int32(45)}
	got := networkInterfaceRequests(prefixed)
	if len(got) != 1 || sdkaws.ToInt32(got[0].Ipv4PrefixCount) != 2 || sdkaws.ToInt32(got[0].DeviceIndex) != 0 ||
		sdkaws.ToInt32(got[0].ConnectionTrackingSpecification.UdpTimeout) != 45 || len(got[0].Groups) != 1 {
		t.Errorf("primary only: %+v", got)
	}
	if prefixed.Name() == plain.Name() {
		t.Error("prefix count does not change the template name")
	}

	efa := prefixed
	efa.AssociatePublicIP = sdkaws.Bool(false)
	efa.NetworkInterfaces = []*apis.NetworkInterface{
		{NetworkCardIndex: sdkaws.Int32(0), DeviceIndex: sdkaws.Int32(0), InterfaceType: apis.InterfaceTypeInterface},
		{NetworkCardIndex: sdkaws.Int32(1), DeviceIndex: sdkaws.Int32(0), InterfaceType: apis.InterfaceTypeEFAOnly},
	}
	got = networkInterfaceRequests(efa)
	if len(got) != 2 || sdkaws.ToString(got[1].InterfaceType) != "efa-only" || sdkaws.ToInt32(got[1].NetworkCardIndex) != 1 {
		t.Fatalf("layout: %+v", got)
	}
	if got[0].Ipv4PrefixCount == nil || got[0].AssociatePublicIpAddress == nil || got[0].ConnectionTrackingSpecification == nil {
		t.Errorf("primary lost its settings: %+v", got[0])
	}
	if got[1].Ipv4PrefixCount != nil || got[1].AssociatePublicIpAddress != nil || got[1].ConnectionTrackingSpecification != nil || len(got[1].Groups) != 1 {
		t.Errorf("EFA-only interface: %+v", got[1])
	}
}

func TestVolumeInitializationRate(t *testing.T) {
	size := resource.MustParse("20Gi")
	nc := &apis.EC2NodeClass{Spec: apis.EC2NodeClassSpec{BlockDeviceMappings: []*apis.BlockDeviceMapping{{
		DeviceName: sdkaws.String("/dev/xvda"),
		EBS:        &apis.BlockDevice{SnapshotID: sdkaws.String("snap-1"), VolumeSize: &size, VolumeInitializationRate: sdkaws.Int32(200)},
	}}}}
	got, err := blockDeviceRequests(nc)
	if err != nil || len(got) != 1 || sdkaws.ToInt32(got[0].Ebs.VolumeInitializationRate) != 200 {
		t.Errorf("%v %+v", err, got)
	}
}
