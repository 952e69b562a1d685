package catalog

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// SpotKey identifies a spot price: instance type in one zone.
type SpotKey struct {
	InstanceType string
	Zone         string
}

// EC2Input is what the AWS API returns, gathered by the caller (internal/aws)
// or read from files: DescribeInstanceTypes, DescribeInstanceTypeOfferings
// (LocationType=availability-zone), DescribeAvailabilityZones, Pricing
// GetProducts and DescribeSpotPriceHistory.
type EC2Input struct {
	Region        string
	InstanceTypes []ec2types.InstanceTypeInfo
	Offerings     []ec2types.InstanceTypeOffering
	// Zones maps zone name to zone ID. Zones without an ID get DefaultZoneID.
	// When nil, the zones are those named by Offerings.
	Zones map[string]string
	// OnDemand is $/hour per instance type. A type without a price gets
	// unavailable on-demand offerings (Karpenter does the same).
	OnDemand       map[string]float64
	OnDemandSource string // default PriceSourcePricingAPI
	// Spot is $/hour per (type, zone). When nil, or when DeriveMissingSpot is
	// set and an entry is missing, the spot price is derived from on-demand
	// (DerivedSpotPrice) and labelled PriceSourceDerivedSpot.
	Spot              map[SpotKey]float64
	SpotSource        string // default PriceSourcePricingAPI
	DeriveMissingSpot bool
}

// FromEC2 builds a catalog from EC2 API shapes. Types with no offering in
// the region, or whose architecture Kubernetes nodes cannot have (mac, i386
// only), are left out: they cannot be launched by a NodePool.
func FromEC2(in EC2Input) (*Catalog, error) {
	if in.Region == "" {
		return nil, fmt.Errorf("build catalog: region is empty")
	}
	zoneIDs, offered, err := offeredZones(in)
	if err != nil {
		return nil, err
	}
	zones := make([]Zone, 0, len(zoneIDs))
	for name, id := range zoneIDs {
		if id == "" {
			id = DefaultZoneID(name)
		}
		zoneIDs[name] = id
		zones = append(zones, Zone{Name: name, ID: id})
	}
	sort.Slice(zones, func(i, j int) bool { return zones[i].Name < zones[j].Name })

	pr := newPricer(in)
	types := make([]*InstanceType, 0, len(in.InstanceTypes))
	for i := range in.InstanceTypes {
		info := &in.InstanceTypes[i]
		it, err := FromInstanceTypeInfo(info)
		if err != nil {
			return nil, fmt.Errorf("build catalog %s: %w", in.Region, err)
		}
		if it == nil {
			continue
		}
		typeZones := offered[it.Name]
		if len(typeZones) == 0 {
			continue
		}
		sort.Strings(typeZones)
		for _, zone := range dedupSorted(typeZones) {
			for _, ct := range it.CapacityTypes {
				it.Offerings = append(it.Offerings, pr.offering(it.Name, zone, zoneIDs[zone], ct))
			}
		}
		it.Labels = TypeLabels(it, in.Region)
		types = append(types, it)
	}
	return New(in.Region, zones, types)
}

// offeredZones returns the zones (name to ID, the ID empty when the caller
// gave none) and, per instance type, the zones it is offered in. Offerings in
// zones the caller did not list are dropped; when the caller lists no zones,
// every offered zone counts.
func offeredZones(in EC2Input) (zoneIDs map[string]string, offered map[string][]string, err error) {
	zoneIDs = map[string]string{}
	for name, id := range in.Zones {
		zoneIDs[name] = id
	}
	offered = map[string][]string{} // type -> zones
	for i, o := range in.Offerings {
		if o.Location == nil || *o.Location == "" || o.InstanceType == "" {
			return nil, nil, fmt.Errorf("build catalog %s: offering %d has no instance type or location", in.Region, i)
		}
		if o.LocationType != "" && o.LocationType != ec2types.LocationTypeAvailabilityZone {
			return nil, nil, fmt.Errorf("build catalog %s: offering %d has location type %q, want availability-zone", in.Region, i, o.LocationType)
		}
		zone := *o.Location
		if in.Zones == nil {
			if _, ok := zoneIDs[zone]; !ok {
				zoneIDs[zone] = ""
			}
		} else if _, ok := zoneIDs[zone]; !ok {
			// An offering in a zone the caller did not list (e.g. a Local Zone the
			// account has not opted into) cannot be launched.
			continue
		}
		offered[string(o.InstanceType)] = append(offered[string(o.InstanceType)], zone)
	}
	return zoneIDs, offered, nil
}

// pricer prices offerings from an EC2Input's price tables.
type pricer struct {
	in                   *EC2Input
	odSource, spotSource string
}

func newPricer(in EC2Input) pricer {
	pr := pricer{in: &in, odSource: in.OnDemandSource, spotSource: in.SpotSource}
	if pr.odSource == "" {
		pr.odSource = PriceSourcePricingAPI
	}
	if pr.spotSource == "" {
		pr.spotSource = PriceSourcePricingAPI
	}
	return pr
}

// offering is one (type, zone, capacity type) offering with its price, where
// the price came from, and whether it is available (priced above zero).
func (pr pricer) offering(typ, zone, zoneID, ct string) Offering {
	o := Offering{Zone: zone, ZoneID: zoneID, CapacityType: ct}
	od, hasOD := pr.in.OnDemand[typ]
	switch ct {
	case CapacityTypeOnDemand:
		o.Price, o.Available, o.PriceSource = od, hasOD && od > 0, pr.odSource
	case CapacityTypeSpot:
		sp, ok := pr.in.Spot[SpotKey{typ, zone}]
		switch {
		case ok && sp > 0:
			o.Price, o.Available, o.PriceSource = sp, true, pr.spotSource
		case (pr.in.Spot == nil || pr.in.DeriveMissingSpot) && hasOD && od > 0:
			o.Price, o.Available, o.PriceSource = DerivedSpotPrice(typ, zone, od), true, PriceSourceDerivedSpot
		default:
			o.PriceSource = pr.spotSource
		}
	}
	return o
}

func dedupSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// FromInstanceTypeInfo converts one DescribeInstanceTypes entry. It returns
// nil, nil for types a Kubernetes node cannot run on (no amd64/arm64
// architecture, or neither on-demand nor spot usage class), and an error for
// entries missing the fields every real entry has.
func FromInstanceTypeInfo(info *ec2types.InstanceTypeInfo) (*InstanceType, error) {
	name := string(info.InstanceType)
	if err := checkInfo(name, info); err != nil {
		return nil, err
	}
	arch := ""
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		if k, ok := kubeArch[string(a)]; ok {
			arch = k
			break
		}
	}
	if arch == "" {
		return nil, nil
	}
	it := &InstanceType{
		Name:              name,
		Architecture:      arch,
		VCPU:              int64(*info.VCpuInfo.DefaultVCpus),
		MemoryMiB:         *info.MemoryInfo.SizeInMiB,
		Hypervisor:        string(info.Hypervisor),
		BareMetal:         deref(info.BareMetal),
		CurrentGeneration: deref(info.CurrentGeneration),
		Burstable:         deref(info.BurstablePerformanceSupported),
		CPUManufacturer:   deref(info.ProcessorInfo.Manufacturer),
	}
	if pgi := info.PlacementGroupInfo; pgi != nil {
		for _, st := range pgi.SupportedStrategies {
			it.PlacementStrategies = append(it.PlacementStrategies, string(st))
		}
	}
	it.NestedVirtualization = slices.Contains(info.ProcessorInfo.SupportedFeatures, ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization)
	if ghz := deref(info.ProcessorInfo.SustainedClockSpeedInGhz); ghz > 0 {
		it.CPUClockMHz = int64(math.Round(ghz * 1000))
	}
	for _, uc := range info.SupportedUsageClasses {
		switch string(uc) {
		case CapacityTypeOnDemand, CapacityTypeSpot:
			it.CapacityTypes = append(it.CapacityTypes, string(uc))
		}
	}
	if len(it.CapacityTypes) == 0 {
		return nil, nil
	}
	sort.Strings(it.CapacityTypes)
	splitName(it)
	addAccelerators(it, info)
	addNetwork(it, info.NetworkInfo)
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && s.TotalSizeInGB != nil {
		it.LocalNVMeGiB = *s.TotalSizeInGB
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedInfo != nil && e.EbsOptimizedSupport == ec2types.EbsOptimizedSupportDefault {
		it.EBSBandwidthMbps = int64(deref(e.EbsOptimizedInfo.MaximumBandwidthInMbps))
	}
	return it, nil
}

// checkInfo fails for an entry missing the fields every real entry has.
func checkInfo(name string, info *ec2types.InstanceTypeInfo) error {
	if name == "" {
		return fmt.Errorf("instance type info without InstanceType")
	}
	if info.VCpuInfo == nil || info.VCpuInfo.DefaultVCpus == nil {
		return fmt.Errorf("instance type %s: VCpuInfo.DefaultVCpus missing", name)
	}
	if info.MemoryInfo == nil || info.MemoryInfo.SizeInMiB == nil {
		return fmt.Errorf("instance type %s: MemoryInfo.SizeInMiB missing", name)
	}
	if info.ProcessorInfo == nil {
		return fmt.Errorf("instance type %s: ProcessorInfo missing", name)
	}
	return nil
}

// addAccelerators fills the GPUs, Neuron devices and inference accelerators.
func addAccelerators(it *InstanceType, info *ec2types.InstanceTypeInfo) {
	if info.GpuInfo != nil {
		for _, g := range info.GpuInfo.Gpus {
			gpu := GPU{Name: deref(g.Name), Manufacturer: deref(g.Manufacturer), Count: int64(deref(g.Count))}
			if g.MemoryInfo != nil {
				gpu.MemoryMiB = int64(deref(g.MemoryInfo.SizeInMiB))
			}
			it.GPUs = append(it.GPUs, gpu)
		}
	}
	if info.NeuronInfo != nil {
		for i, d := range info.NeuronInfo.NeuronDevices {
			it.NeuronDevices += int64(deref(d.Count))
			if i == 0 {
				it.NeuronName = deref(d.Name)
				if d.CoreInfo != nil {
					it.NeuronCores = int64(deref(d.Count)) * int64(deref(d.CoreInfo.Count))
				}
				if d.MemoryInfo != nil {
					it.NeuronMemoryMiB = int64(deref(d.MemoryInfo.SizeInMiB))
				}
			}
		}
		if len(info.NeuronInfo.NeuronDevices) != 1 {
			// Karpenter labels accelerators only for a single device model.
			it.NeuronName = ""
		}
	}
	// Karpenter labels inference accelerators only when the type has no
	// Neuron devices (inf1/inf2 list both) and a single accelerator model.
	if ia := info.InferenceAcceleratorInfo; ia != nil && info.NeuronInfo == nil {
		for _, a := range ia.Accelerators {
			it.InferenceAccelerators += int64(deref(a.Count))
		}
		if len(ia.Accelerators) == 1 {
			it.InferenceAcceleratorName = deref(ia.Accelerators[0].Name)
			it.InferenceAcceleratorManufacturer = deref(ia.Accelerators[0].Manufacturer)
		}
	}
}

// addNetwork fills the ENI limits, EFA, encryption in transit and bandwidth.
func addNetwork(it *InstanceType, n *ec2types.NetworkInfo) {
	if n == nil {
		return
	}
	it.EncryptionInTransit = deref(n.EncryptionInTransitSupported)
	if n.EfaInfo != nil {
		it.EFA = int64(deref(n.EfaInfo.MaximumEfaInterfaces))
	}
	it.IPv4PerENI = int64(deref(n.Ipv4AddressesPerInterface))
	it.NetworkCards = int64(deref(n.MaximumNetworkCards))
	if c := int64(len(n.NetworkCards)); c > it.NetworkCards {
		it.NetworkCards = c
	}
	it.MaxENIs = int64(deref(n.MaximumNetworkInterfaces))
	def := deref(n.DefaultNetworkCardIndex)
	var bw float64
	for _, c := range n.NetworkCards {
		if deref(c.NetworkCardIndex) == def && c.MaximumNetworkInterfaces != nil {
			// The VPC CNI only uses the default network card.
			it.MaxENIs = int64(*c.MaximumNetworkInterfaces)
		}
		bw += deref(c.BaselineBandwidthInGbps)
	}
	it.NetworkBandwidthMbps = int64(math.Round(bw * 1000))
}

var kubeArch = map[string]string{"x86_64": "amd64", "arm64": "arm64"}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// regionAbbrev maps region name parts to the short forms AWS uses in zone IDs.
var regionAbbrev = map[string]string{
	"east": "e", "west": "w", "north": "n", "south": "s", "central": "c",
	"northeast": "ne", "northwest": "nw", "southeast": "se", "southwest": "sw",
}

var areaAbbrev = map[string]string{
	"us": "us", "eu": "eu", "ap": "ap", "sa": "sa", "ca": "ca", "me": "me", "af": "af", "il": "il", "mx": "mx",
}

// DefaultZoneID guesses the zone ID of a zone name: us-east-1a -> use1-az1.
// Real mappings differ per account; callers with DescribeAvailabilityZones
// output should pass the real IDs instead.
func DefaultZoneID(zone string) string {
	parts := strings.Split(zone, "-")
	if len(parts) != 3 || len(parts[2]) < 2 {
		return ""
	}
	area, ok := areaAbbrev[parts[0]]
	if !ok {
		return ""
	}
	dir, ok := regionAbbrev[parts[1]]
	if !ok {
		return ""
	}
	num, letter := parts[2][:len(parts[2])-1], parts[2][len(parts[2])-1]
	if letter < 'a' || letter > 'z' {
		return ""
	}
	return fmt.Sprintf("%s%s%s-az%d", area, dir, num, int(letter-'a')+1)
}
