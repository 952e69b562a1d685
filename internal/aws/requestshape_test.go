package aws

import (
	"context"
	"encoding/base64"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// The request shapes here are Karpenter-AWS v1.14.1's, found different by
// the differential test (internal/aws/karpenterawsdiff), which launches the
// whole corpus through both providers.

// templateRecorder records the launch templates a provider creates; no
// template exists beforehand.
type templateRecorder struct {
	panicEC2
	mu      sync.Mutex
	created []*ec2.CreateLaunchTemplateInput
}

func (r *templateRecorder) DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	return &ec2.DescribeLaunchTemplatesOutput{}, nil
}

func (r *templateRecorder) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.created = append(r.created, in)
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateId: sdkaws.String("lt-1"), LaunchTemplateName: in.LaunchTemplateName}}, nil
}

// shapeLaunch is one claim's launch over a recorder: an AL2023 class with
// a team tag, two security groups and one subnet per zone.
type shapeLaunch struct {
	p   *Provider
	rec *templateRecorder
	l   *launch
}

func newShapeLaunch(t *testing.T, c *apis.NodeClaim, family string) *shapeLaunch {
	t.Helper()
	rec := &templateRecorder{}
	p, err := New(Options{ClusterName: "demo", Region: "us-west-2", Owner: "owner", Now: func() time.Time { return time.Unix(1000, 0) },
		Logger: slog.New(slog.DiscardHandler)},
		Clients{EC2: rec}, nil)
	if err != nil {
		t.Fatal(err)
	}
	nc := &apis.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: apis.EC2NodeClassSpec{
		AMIFamily: sdkaws.String(family), Role: "NodeRole", Tags: map[string]string{"team": "payments"},
	}}
	l := &launch{claim: c, nc: nc, profile: "profile",
		cluster: ClusterInfo{Name: "demo", Endpoint: "https://demo", CABundle: "Y2E=", Version: "1.32", ServiceCIDR: "10.100.0.0/16", IPFamily: "ipv4"},
		groups:  []SecurityGroup{{ID: "sg-1"}, {ID: "sg-2"}},
	}
	return &shapeLaunch{p: p, rec: rec, l: l}
}

func (s *shapeLaunch) fleet(t *testing.T, capacityType string, opts []option) *ec2.CreateFleetInput {
	t.Helper()
	in, _, err := s.p.fleetInput(context.Background(), s.l, zonalAB, capacityType, opts, 0)
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func opt(it *catalog.InstanceType, ami string, offs ...catalog.Offering) option {
	return option{it: it, offerings: offs, ami: AMI{ID: ami, Architecture: it.Architecture}}
}

var (
	m5Large = &catalog.InstanceType{Name: "m5.large", Architecture: "amd64", MaxENIs: 3, IPv4PerENI: 10}
	c5Large = &catalog.InstanceType{Name: "c5.large", Architecture: "amd64", MaxENIs: 3, IPv4PerENI: 10}
)

func TestLaunchTemplateShapeIsKarpenters(t *testing.T) {
	s := newShapeLaunch(t, claim(), apis.AMIFamilyAL2023)
	s.fleet(t, catalog.CapacityTypeOnDemand, []option{opt(m5Large, "ami-1", catalog.Offering{Zone: "us-west-2a", CapacityType: "on-demand", Price: 0.096})})
	if len(s.rec.created) != 1 {
		t.Fatalf("%d templates", len(s.rec.created))
	}
	in := s.rec.created[0]
	d := in.LaunchTemplateData
	// Account-level IMDS defaults can switch instance tags on; Karpenter's
	// tag keys (kubernetes.io/cluster/<name>) are not valid metadata keys.
	if d.MetadataOptions.InstanceMetadataTags != ec2types.LaunchTemplateInstanceMetadataTagsStateDisabled {
		t.Errorf("instance metadata tags %q, want disabled", d.MetadataOptions.InstanceMetadataTags)
	}
	if d.SecurityGroupIds != nil || len(d.NetworkInterfaces) != 1 || sdkaws.ToInt32(d.NetworkInterfaces[0].DeviceIndex) != 0 ||
		strings.Join(d.NetworkInterfaces[0].Groups, ",") != "sg-1,sg-2" {
		t.Errorf("security groups %v, interfaces %+v: want them on the primary interface", d.SecurityGroupIds, d.NetworkInterfaces)
	}
	if d.Placement == nil || d.Placement.Tenancy != ec2types.TenancyDefault {
		t.Errorf("placement %+v, want default tenancy", d.Placement)
	}
	if d.EnclaveOptions == nil || d.EnclaveOptions.Enabled == nil || *d.EnclaveOptions.Enabled {
		t.Errorf("enclave options %+v, want disabled", d.EnclaveOptions)
	}
	if c := d.CapacityReservationSpecification; c == nil || c.CapacityReservationPreference != ec2types.CapacityReservationPreferenceNone || c.CapacityReservationTarget != nil {
		t.Errorf("capacity reservation %+v: an on-demand launch must stay out of open reservations", c)
	}
	tags := tagMap(in.TagSpecifications[0].Tags)
	if tags["team"] != "payments" || tags[TagNodePool] != "default" {
		t.Errorf("template tags %v lack the class's tags or the NodePool", tags)
	}
	if _, ok := tags[TagEKSClusterName]; ok {
		t.Errorf("template tags %v carry %s: Karpenter's template cache would delete the template", tags, TagEKSClusterName)
	}
}

func reservedOffering(id, kind string, interruptible bool) catalog.Offering {
	return catalog.Offering{Zone: "us-west-2a", CapacityType: catalog.CapacityTypeReserved, Price: 1e-8, Available: true,
		ReservationID: id, ReservationType: kind, ReservationCapacity: 2, Interruptible: interruptible}
}

func TestReservedLaunchShapes(t *testing.T) {
	reservedClaim := func() *apis.NodeClaim {
		return claim(req(apis.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "reserved"))
	}
	for _, tc := range []struct {
		name          string
		kind          string
		interruptible bool
		target        ec2types.DefaultTargetCapacityType
		market        ec2types.MarketType
	}{
		{"odcr", catalog.ReservationTypeDefault, false, ec2types.DefaultTargetCapacityTypeOnDemand, ""},
		{"capacity block", catalog.ReservationTypeCapacityBlock, false, ec2types.DefaultTargetCapacityTypeCapacityBlock, ec2types.MarketTypeCapacityBlock},
		{"interruptible", catalog.ReservationTypeDefault, true, ec2types.DefaultTargetCapacityTypeReservedCapacity, ec2types.MarketTypeInterruptibleCapacityReservation},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newShapeLaunch(t, reservedClaim(), apis.AMIFamilyAL2023)
			in := s.fleet(t, catalog.CapacityTypeReserved, []option{
				opt(c5Large, "ami-1", reservedOffering("cr-1", tc.kind, tc.interruptible)),
				opt(m5Large, "ami-1", reservedOffering("cr-2", tc.kind, tc.interruptible)),
			})
			if got := in.TargetCapacitySpecification.DefaultTargetCapacityType; got != tc.target {
				t.Errorf("target capacity type %q, want %q", got, tc.target)
			}
			if tc.target != ec2types.DefaultTargetCapacityTypeOnDemand && in.OnDemandOptions != nil {
				t.Errorf("on-demand options %+v on a %s launch", in.OnDemandOptions, tc.target)
			}
			if tc.interruptible && (in.ReservedCapacityOptions == nil || len(in.ReservedCapacityOptions.ReservationTypes) != 1 ||
				in.ReservedCapacityOptions.ReservationTypes[0] != ec2types.FleetReservationTypeInterruptibleCapacityReservation) {
				t.Errorf("reserved capacity options %+v", in.ReservedCapacityOptions)
			}
			// CreateFleet takes one capacity block per request; ODCRs go
			// together, one template per reservation.
			want := 2
			if tc.kind == catalog.ReservationTypeCapacityBlock {
				want = 1
			}
			if n := len(in.LaunchTemplateConfigs); n != want || len(s.rec.created) != want {
				t.Errorf("%d configs, %d templates, want %d", n, len(s.rec.created), want)
			}
			for _, lt := range s.rec.created {
				d := lt.LaunchTemplateData
				c := d.CapacityReservationSpecification
				if c == nil || c.CapacityReservationPreference != ec2types.CapacityReservationPreferenceCapacityReservationsOnly || c.CapacityReservationTarget == nil {
					t.Errorf("capacity reservation %+v: a reserved launch goes into its reservation or fails", c)
				}
				if got := ec2types.MarketType(""); d.InstanceMarketOptions != nil {
					got = d.InstanceMarketOptions.MarketType
					if got != tc.market {
						t.Errorf("market type %q, want %q", got, tc.market)
					}
				} else if tc.market != "" {
					t.Errorf("no market options, want %q", tc.market)
				}
				ud, _ := base64.StdEncoding.DecodeString(sdkaws.ToString(d.UserData))
				if strings.Contains(string(ud), catalog.LabelCapacityReservationID) {
					t.Errorf("user data names the reservation (registration labels the node from the claim):\n%s", ud)
				}
			}
		})
	}
}

func TestFleetOverridesNameTheirImageAndPrice(t *testing.T) {
	s := newShapeLaunch(t, claim(), apis.AMIFamilyAL2023)
	in := s.fleet(t, catalog.CapacityTypeSpot, []option{
		opt(c5Large, "ami-1", catalog.Offering{Zone: "us-west-2b", CapacityType: "spot", Price: 0.03}, catalog.Offering{Zone: "us-west-2a", CapacityType: "spot", Price: 0.04}),
		opt(m5Large, "ami-1", catalog.Offering{Zone: "us-west-2a", CapacityType: "spot", Price: 0.05}),
	})
	var got []string
	for _, c := range in.LaunchTemplateConfigs {
		for _, o := range c.Overrides {
			if sdkaws.ToString(o.ImageId) != "ami-1" {
				t.Errorf("override %s in %s names image %q", o.InstanceType, sdkaws.ToString(o.AvailabilityZone), sdkaws.ToString(o.ImageId))
			}
			got = append(got, string(o.InstanceType)+"="+strconv.FormatFloat(sdkaws.ToFloat64(o.Priority), 'f', -1, 64))
		}
	}
	if strings.Join(got, " ") != "c5.large=0.03 c5.large=0.04 m5.large=0.05" {
		t.Errorf("override priorities %v, want each offering's price", got)
	}
}

func TestUserDataLabelsAreKarpenters(t *testing.T) {
	c := claim(req(corev1.LabelInstanceTypeStable, corev1.NodeSelectorOpIn, "m5.large"), req("team", corev1.NodeSelectorOpIn, "a"))
	for _, family := range []string{apis.AMIFamilyAL2023, apis.AMIFamilyBottlerocket, apis.AMIFamilyAL2} {
		s := newShapeLaunch(t, c, family)
		s.fleet(t, catalog.CapacityTypeOnDemand, []option{opt(m5Large, "ami-1", catalog.Offering{Zone: "us-west-2a", CapacityType: "on-demand", Price: 0.096})})
		ud, _ := base64.StdEncoding.DecodeString(sdkaws.ToString(s.rec.created[0].LaunchTemplateData.UserData))
		// The instance type comes with the instance, and registration
		// copies the claim's labels: in the user data it would only make a
		// template per instance type.
		if strings.Contains(string(ud), corev1.LabelInstanceTypeStable) {
			t.Errorf("%s: user data registers the instance type:\n%s", family, ud)
		}
		// The kubelet registers the claim's taints itself (every family but
		// Custom): registration must not add back a startup taint an agent
		// already removed (kubernetes-sigs/karpenter #1772).
		for _, want := range []string{"karpenter.sh/do-not-sync-taints", "team", "karpenter.sh/nodepool"} {
			if !strings.Contains(string(ud), want) {
				t.Errorf("%s: user data lacks the label %s:\n%s", family, want, ud)
			}
		}
	}
}

// In an IPv6 cluster the interfaces get an IPv6 address (primary) and the
// class's prefixes as IPv6 prefixes, as Karpenter's do: pods take their
// addresses from them.
func TestIPv6ClusterInterfaces(t *testing.T) {
	s := newShapeLaunch(t, claim(), apis.AMIFamilyAL2023)
	s.l.cluster.IPFamily, s.l.cluster.ServiceCIDR = "ipv6", "fd00:10:100::/108"
	s.l.nc.Spec.IPPrefixCount = sdkaws.Int32(2)
	s.fleet(t, catalog.CapacityTypeOnDemand, []option{opt(m5Large, "ami-1", catalog.Offering{Zone: "us-west-2a", CapacityType: "on-demand", Price: 0.096})})
	nis := s.rec.created[0].LaunchTemplateData.NetworkInterfaces
	if len(nis) != 1 || !sdkaws.ToBool(nis[0].PrimaryIpv6) || sdkaws.ToInt32(nis[0].Ipv6AddressCount) != 1 ||
		sdkaws.ToInt32(nis[0].Ipv6PrefixCount) != 2 || nis[0].Ipv4PrefixCount != nil {
		t.Errorf("interfaces %+v: want a primary IPv6 address and 2 IPv6 prefixes", nis)
	}
}
