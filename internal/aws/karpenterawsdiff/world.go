package karpenterawsdiff

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"

	"github.com/aws/karpenter-provider-aws/pkg/fake"

	"github.com/nodewright/nodewright/internal/catalog"
)

// The one account and cluster both providers launch into.
const (
	clusterName     = "demo"
	region          = "us-west-2"
	clusterEndpoint = "https://0123456789ABCDEF.gr7.us-west-2.eks.amazonaws.com"
	caBundle        = "Y2EtYnVuZGxlCg==" // base64 of "ca-bundle\n", as EKS returns it
	// The service CIDR and the cluster DNS address of an IPv4 and of an
	// IPv6 cluster (the tenth address, as EKS assigns kube-dns).
	serviceCIDR  = "10.100.0.0/16"
	kubeDNSIP    = "10.100.0.10"
	serviceCIDR6 = "fd00:10:100::/108"
	kubeDNSIP6   = "fd00:10:100::a"
	accountID    = "111122223333"
	owner        = "arn:aws:dynamodb:us-west-2:111122223333:table/nodewright-demo"
)

// worldNow is both providers' clock; images are made in the year before.
var (
	worldNow   = time.Date(2025, 7, 1, 0, 0, 0, 0, time.UTC)
	imageEpoch = worldNow.Add(-366 * 24 * time.Hour)
)

// subnetSpec is one subnet of a shape.
type subnetSpec struct {
	ID   string
	Zone string
	IPs  int32
}

// shape is the launch's environment besides the class and the claim: the
// instance types the claim may use, the subnets its class selects and the
// cluster's IP family.
type shape struct {
	Name    string
	Types   []string
	Subnets []subnetSpec
	IPv6    bool
}

// serviceNetwork is the cluster's service CIDR and DNS address.
func (s shape) serviceNetwork() (cidr, dns string) {
	if s.IPv6 {
		return serviceCIDR6, kubeDNSIP6
	}
	return serviceCIDR, kubeDNSIP
}

var (
	oneSubnet = []subnetSpec{{ID: "subnet-0a00000000000001", Zone: "us-west-2a", IPs: 100}}
	// Two subnets in us-west-2a: both sides must take the one with more
	// free addresses.
	severalSubnets = []subnetSpec{
		{ID: "subnet-0a00000000000001", Zone: "us-west-2a", IPs: 100},
		{ID: "subnet-0a00000000000002", Zone: "us-west-2a", IPs: 250},
		{ID: "subnet-0b00000000000001", Zone: "us-west-2b", IPs: 200},
		{ID: "subnet-0c00000000000001", Zone: "us-west-2c", IPs: 150},
	}
	oneType = []string{"m5.large"}
	// Both architectures, two families and two sizes: more than one
	// template (image, max pods) per launch.
	severalTypes = []string{"c5.large", "m5.large", "m5.xlarge", "m6g.large"}
)

// shapes are one and several instance types by one and several subnets
// in an IPv4 cluster, and the largest in an IPv6 cluster.
var shapes = []shape{
	{Name: "1type-1subnet", Types: oneType, Subnets: oneSubnet},
	{Name: "1type-4subnets", Types: oneType, Subnets: severalSubnets},
	{Name: "4types-1subnet", Types: severalTypes, Subnets: oneSubnet},
	{Name: "4types-4subnets", Types: severalTypes, Subnets: severalSubnets},
	{Name: "4types-4subnets-ipv6", Types: severalTypes, Subnets: severalSubnets, IPv6: true},
}

// securityGroups are what every class's security group selector finds.
var securityGroups = []ec2types.SecurityGroup{
	{GroupId: sdkaws.String("sg-0000000000000001"), GroupName: sdkaws.String("demo-node")},
	{GroupId: sdkaws.String("sg-0000000000000002"), GroupName: sdkaws.String("demo-cluster")},
}

// world answers the discovery calls of both providers the same way.
type world struct {
	shape shape
	// version is the cluster's Kubernetes version (kubernetesVersion).
	version string
	input   catalog.EC2Input // the embedded catalog's EC2 shapes, the shape's types only
	cat     *catalog.Catalog
	mu      sync.Mutex
	// reservationKind is the kind of the reservations (ReservationODCR...).
	reservationKind string
	// images are those SSM parameters or selectors have named, by id.
	images map[string]ec2types.Image
}

// kubernetesVersion is the cluster version a class launches on: 1.32
// keeps the AL2 family in the corpus (EKS publishes no AL2 images from
// 1.33 on); Windows Server 2025 images start at 1.35.
func kubernetesVersion(family string) string {
	if family == "Windows2025" {
		return "1.35"
	}
	return "1.32"
}

func newWorld(s shape, version, reservationKind string) (*world, error) {
	in, err := catalog.ReadEC2Data(catalog.EmbeddedData(), region, catalog.PriceSourceEmbedded)
	if err != nil {
		return nil, fmt.Errorf("embedded catalog: %w", err)
	}
	in.InstanceTypes = slices.DeleteFunc(in.InstanceTypes, func(i ec2types.InstanceTypeInfo) bool {
		return !slices.Contains(s.Types, string(i.InstanceType))
	})
	in.Offerings = slices.DeleteFunc(in.Offerings, func(o ec2types.InstanceTypeOffering) bool {
		return !slices.Contains(s.Types, string(o.InstanceType)) || !hasZone(s, sdkaws.ToString(o.Location))
	})
	if len(in.InstanceTypes) != len(s.Types) {
		return nil, fmt.Errorf("embedded catalog lacks some of %v", s.Types)
	}
	cat, err := catalog.FromEC2(in)
	if err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	w := &world{shape: s, version: version, reservationKind: reservationKind, input: in, cat: cat, images: map[string]ec2types.Image{}}
	// The custom-AMI examples name these two by id.
	w.images["ami-123"] = image("ami-123", "custom-x86_64", ec2types.ArchitectureValuesX8664)
	w.images["ami-456"] = image("ami-456", "custom-arm64", ec2types.ArchitectureValuesArm64)
	return w, nil
}

func hasZone(s shape, zone string) bool {
	return slices.ContainsFunc(s.Subnets, func(sn subnetSpec) bool { return sn.Zone == zone })
}

func (w *world) zoneID(zone string) string {
	if z, ok := w.cat.Zone(zone); ok {
		return z.ID
	}
	return catalog.DefaultZoneID(zone)
}

// image is an available image of the account, created on a day its id
// picks (images of several selector terms are then ordered by age, as
// real ones are, rather than by a tie-break each side makes its own way).
func image(id, name string, arch ec2types.ArchitectureValues) ec2types.Image {
	day, _ := strconv.ParseUint(digest(id)[:4], 16, 32)
	created := imageEpoch.Add(time.Duration(day%365) * 24 * time.Hour).Format("2006-01-02T15:04:05.000Z")
	return ec2types.Image{
		ImageId: sdkaws.String(id), Name: sdkaws.String(name), Architecture: arch, CreationDate: sdkaws.String(created),
		State: ec2types.ImageStateAvailable, OwnerId: sdkaws.String(accountID),
	}
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:17]
}

// parameterImage is the image an SSM parameter names: one per path, its
// architecture read from the path (the EKS and Bottlerocket parameters
// name it).
func (w *world) parameterImage(path string) string {
	id := "ami-" + digest(path)
	arch := ec2types.ArchitectureValuesX8664
	if strings.Contains(path, "arm64") {
		arch = ec2types.ArchitectureValuesArm64
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.images[id]; !ok {
		w.images[id] = image(id, strings.Trim(strings.ReplaceAll(path, "/", "-"), "-"), arch)
	}
	return id
}

// describeImages answers by id what SSM or the examples named; a name or
// tag query finds one image per architecture whose name and tags match it.
func (w *world) describeImages(in *ec2.DescribeImagesInput) []ec2types.Image {
	ids := slices.Clone(in.ImageIds)
	var name string
	var tags []ec2types.Tag
	for _, f := range in.Filters {
		if len(f.Values) == 0 {
			continue
		}
		switch k := sdkaws.ToString(f.Name); {
		case k == "image-id":
			ids = append(ids, f.Values...)
		case k == "name":
			name = f.Values[0]
		case strings.HasPrefix(k, "tag:"):
			tags = append(tags, ec2types.Tag{Key: sdkaws.String(strings.TrimPrefix(k, "tag:")), Value: sdkaws.String(concrete(f.Values[0]))})
		case k == "tag-key":
			tags = append(tags, ec2types.Tag{Key: sdkaws.String(f.Values[0]), Value: sdkaws.String("")})
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []ec2types.Image
	if len(ids) > 0 {
		for _, id := range ids {
			img, ok := w.images[id]
			if !ok {
				img = image(id, "unnamed-"+id, ec2types.ArchitectureValuesX8664)
			}
			out = append(out, img)
		}
		return out
	}
	if name == "" && len(tags) == 0 {
		return nil
	}
	for _, arch := range []ec2types.ArchitectureValues{ec2types.ArchitectureValuesX8664, ec2types.ArchitectureValuesArm64} {
		key := name + "|" + string(arch) + "|" + fmt.Sprint(tagPairs(tags))
		img := image("ami-"+digest(key), concrete(name)+"-"+string(arch), arch)
		img.Tags = tags
		out = append(out, img)
	}
	return out
}

func tagPairs(tags []ec2types.Tag) []string {
	out := make([]string, 0, len(tags))
	for _, t := range tags {
		out = append(out, sdkaws.ToString(t.Key)+"="+sdkaws.ToString(t.Value))
	}
	slices.Sort(out)
	return out
}

// concrete is a value matching an EC2 filter pattern.
func concrete(pattern string) string {
	return strings.NewReplacer("*", "x", "?", "x").Replace(pattern)
}

// describeSubnets finds the shape's subnets, carrying whatever tags the
// query asks for (a term naming an id finds that id in the first zone).
func (w *world) describeSubnets(in *ec2.DescribeSubnetsInput) []ec2types.Subnet {
	tags := filterTags(in.Filters)
	var out []ec2types.Subnet
	if len(in.SubnetIds) > 0 {
		for _, id := range in.SubnetIds {
			out = append(out, w.subnet(subnetSpec{ID: id, Zone: w.shape.Subnets[0].Zone, IPs: 100}, tags))
		}
		return out
	}
	for _, s := range w.shape.Subnets {
		out = append(out, w.subnet(s, tags))
	}
	return out
}

func (w *world) subnet(s subnetSpec, tags []ec2types.Tag) ec2types.Subnet {
	for _, sn := range w.shape.Subnets {
		if sn.ID == s.ID {
			s = sn
		}
	}
	return ec2types.Subnet{
		SubnetId: sdkaws.String(s.ID), AvailabilityZone: sdkaws.String(s.Zone), AvailabilityZoneId: sdkaws.String(w.zoneID(s.Zone)),
		AvailableIpAddressCount: sdkaws.Int32(s.IPs), State: ec2types.SubnetStateAvailable, VpcId: sdkaws.String("vpc-0000000000000001"),
		MapPublicIpOnLaunch: sdkaws.Bool(false), Tags: tags,
	}
}

// describeSecurityGroups finds the two groups, or the one a name or id
// names, carrying the tags the query asks for.
func describeSecurityGroups(in *ec2.DescribeSecurityGroupsInput) []ec2types.SecurityGroup {
	tags := filterTags(in.Filters)
	var out []ec2types.SecurityGroup
	for _, id := range in.GroupIds {
		out = append(out, ec2types.SecurityGroup{GroupId: sdkaws.String(id), GroupName: sdkaws.String("group-" + id), Tags: tags})
	}
	for _, f := range in.Filters {
		if sdkaws.ToString(f.Name) == "group-name" && len(f.Values) > 0 {
			n := f.Values[0]
			out = append(out, ec2types.SecurityGroup{GroupId: sdkaws.String("sg-" + digest(n)), GroupName: sdkaws.String(n), Tags: tags})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, g := range securityGroups {
		g.Tags = tags
		out = append(out, g)
	}
	return out
}

func filterTags(filters []ec2types.Filter) []ec2types.Tag {
	var tags []ec2types.Tag
	for _, f := range filters {
		k := sdkaws.ToString(f.Name)
		switch {
		case strings.HasPrefix(k, "tag:") && len(f.Values) > 0:
			tags = append(tags, ec2types.Tag{Key: sdkaws.String(strings.TrimPrefix(k, "tag:")), Value: sdkaws.String(concrete(f.Values[0]))})
		case k == "tag-key" && len(f.Values) > 0:
			tags = append(tags, ec2types.Tag{Key: sdkaws.String(f.Values[0]), Value: sdkaws.String("")})
		}
	}
	return tags
}

// reservationID is the id of the world's one reservation of a type.
func reservationID(instanceType string) string { return "cr-" + digest("reservation/"+instanceType) }

// Reservation kinds a reserved claim launches into.
const (
	ReservationODCR          = "odcr"           // an on-demand capacity reservation
	ReservationCapacityBlock = "capacity-block" // a capacity block for ML
	ReservationInterruptible = "interruptible"  // an interruptible ODCR
)

// reservations are one reservation of the world's kind per type of the
// shape, in the first zone, with room for two instances.
func (w *world) reservations() []ec2types.CapacityReservation {
	var out []ec2types.CapacityReservation
	zone := w.shape.Subnets[0].Zone
	for _, t := range w.shape.Types {
		cr := ec2types.CapacityReservation{
			CapacityReservationId: sdkaws.String(reservationID(t)), InstanceType: sdkaws.String(t),
			AvailabilityZone: sdkaws.String(zone), AvailabilityZoneId: sdkaws.String(w.zoneID(zone)),
			AvailableInstanceCount: sdkaws.Int32(2), TotalInstanceCount: sdkaws.Int32(2), OwnerId: sdkaws.String(accountID),
			InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted, State: ec2types.CapacityReservationStateActive,
			ReservationType: ec2types.CapacityReservationTypeDefault, Tenancy: ec2types.CapacityReservationTenancyDefault,
			InstancePlatform: ec2types.CapacityReservationInstancePlatformLinuxUnix,
		}
		switch w.reservationKind {
		case ReservationCapacityBlock:
			cr.ReservationType = ec2types.CapacityReservationTypeCapacityBlock
			cr.StartDate = sdkaws.Time(worldNow.Add(-time.Hour))
			cr.EndDate = sdkaws.Time(worldNow.Add(10 * 24 * time.Hour))
			cr.EndDateType = ec2types.EndDateTypeLimited
		case ReservationInterruptible:
			cr.Interruptible = sdkaws.Bool(true)
		}
		out = append(out, cr)
	}
	return out
}

func (w *world) describeCapacityReservations(in *ec2.DescribeCapacityReservationsInput) []ec2types.CapacityReservation {
	return fake.FilterDescribeCapacityReservations(w.reservations(), in.CapacityReservationIds, in.Filters)
}

// ssmAPI answers every parameter with the image of its path.
type ssmAPI struct{ w *world }

func (s ssmAPI) GetParameter(_ context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	name := sdkaws.ToString(in.Name)
	if name == "" {
		return nil, &smithy.GenericAPIError{Code: "ParameterNotFound", Message: "no name"}
	}
	return &ssm.GetParameterOutput{Parameter: &ssmtypes.Parameter{Name: in.Name, Value: sdkaws.String(s.w.parameterImage(name))}}, nil
}

// eksAPI describes the one cluster.
type eksAPI struct{ w *world }

func (e eksAPI) DescribeCluster(_ context.Context, _ *eks.DescribeClusterInput, _ ...func(*eks.Options)) (*eks.DescribeClusterOutput, error) {
	network := &ekstypes.KubernetesNetworkConfigResponse{IpFamily: ekstypes.IpFamilyIpv4, ServiceIpv4Cidr: sdkaws.String(serviceCIDR)}
	if e.w.shape.IPv6 {
		network = &ekstypes.KubernetesNetworkConfigResponse{IpFamily: ekstypes.IpFamilyIpv6, ServiceIpv6Cidr: sdkaws.String(serviceCIDR6)}
	}
	return &eks.DescribeClusterOutput{Cluster: &ekstypes.Cluster{
		Name: sdkaws.String(clusterName), Endpoint: sdkaws.String(clusterEndpoint), Version: sdkaws.String(e.w.version),
		Status:                  ekstypes.ClusterStatusActive,
		CertificateAuthority:    &ekstypes.Certificate{Data: sdkaws.String(caBundle)},
		KubernetesNetworkConfig: network,
	}}, nil
}
