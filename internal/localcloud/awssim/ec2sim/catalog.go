package ec2sim

import (
	"fmt"
	"os"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/catalog"
)

// Catalog is what the simulated region sells: instance types, where they are
// offered and their on-demand prices. Spot prices are derived (see SpotPrice).
type Catalog struct {
	Types     map[string]types.InstanceTypeInfo
	Offerings map[string][]string // instance type -> zones
	OnDemand  map[string]float64  // instance type -> $/h (Linux)
	ZoneIDs   map[string]string   // zone name -> zone id (optional)
}

// FromEC2Input builds the simulator's catalog from the project catalog's raw
// EC2 shapes (catalog.ReadEC2Data), so both sell exactly the same things.
func FromEC2Input(in catalog.EC2Input) *Catalog {
	c := &Catalog{Types: map[string]types.InstanceTypeInfo{}, Offerings: map[string][]string{}, OnDemand: map[string]float64{}, ZoneIDs: map[string]string{}}
	for _, info := range in.InstanceTypes {
		c.Types[string(info.InstanceType)] = info
	}
	for _, o := range in.Offerings {
		name, zone := string(o.InstanceType), aws.ToString(o.Location)
		if _, ok := c.Types[name]; !ok {
			continue
		}
		if in.Zones != nil {
			if _, ok := in.Zones[zone]; !ok {
				continue
			}
		}
		c.Offerings[name] = append(c.Offerings[name], zone)
	}
	for n, p := range in.OnDemand {
		c.OnDemand[n] = p
	}
	for z, id := range in.Zones {
		c.ZoneIDs[z] = id
	}
	return c
}

// ZoneID returns the zone id of a zone name.
func (c *Catalog) ZoneID(zone string) string {
	if id := c.ZoneIDs[zone]; id != "" {
		return id
	}
	if id := catalog.DefaultZoneID(zone); id != "" {
		return id
	}
	return zone + "-id"
}

// Zones returns the sorted union of the zones in the offerings.
func (c *Catalog) Zones() []string {
	seen := map[string]bool{}
	for _, zs := range c.Offerings {
		for _, z := range zs {
			seen[z] = true
		}
	}
	out := make([]string, 0, len(seen))
	for z := range seen {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}

// Offered reports whether instanceType is sold in zone.
func (c *Catalog) Offered(instanceType, zone string) bool {
	for _, z := range c.Offerings[instanceType] {
		if z == zone {
			return true
		}
	}
	return false
}

// TypeNames returns the sorted instance type names.
func (c *Catalog) TypeNames() []string {
	out := make([]string, 0, len(c.Types))
	for n := range c.Types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// LoadAWSData reads the ../shared/aws-data layout through the project
// catalog's reader (prices fall back to us-east-1's as it documents).
func LoadAWSData(dir, region string) (*Catalog, error) {
	in, err := catalog.ReadEC2Data(os.DirFS(dir), region, catalog.PriceSourceAWSData)
	if err != nil {
		return nil, fmt.Errorf("load aws data from %s: %w", dir, err)
	}
	return FromEC2Input(in), nil
}

// Embedded is the project's embedded catalog for region, when it has one.
func Embedded(region string) (*Catalog, error) {
	in, err := catalog.ReadEC2Data(catalog.EmbeddedData(), region, catalog.PriceSourceEmbedded)
	if err != nil {
		return nil, fmt.Errorf("embedded catalog %s: %w", region, err)
	}
	return FromEC2Input(in), nil
}

// DefaultCatalog is a small built-in catalog (real shapes and us-east-1
// prices) for when neither the project catalog nor ../shared is available.
func DefaultCatalog(region string) *Catalog {
	type spec struct {
		name       string
		vcpu       int32
		memMiB     int64
		arch       types.ArchitectureType
		enis, ips  int32
		gpus       int32
		price      float64
		zonesLimit int
	}
	specs := []spec{
		{"t3.medium", 2, 4096, types.ArchitectureTypeX8664, 3, 6, 0, 0.0416, 3},
		{"m5.large", 2, 8192, types.ArchitectureTypeX8664, 3, 10, 0, 0.096, 3},
		{"m5.xlarge", 4, 16384, types.ArchitectureTypeX8664, 4, 15, 0, 0.192, 3},
		{"m5.2xlarge", 8, 32768, types.ArchitectureTypeX8664, 4, 15, 0, 0.384, 3},
		{"c5.large", 2, 4096, types.ArchitectureTypeX8664, 3, 10, 0, 0.085, 3},
		{"c5.xlarge", 4, 8192, types.ArchitectureTypeX8664, 4, 15, 0, 0.17, 3},
		{"r5.large", 2, 16384, types.ArchitectureTypeX8664, 3, 10, 0, 0.126, 3},
		{"m6g.large", 2, 8192, types.ArchitectureTypeArm64, 3, 10, 0, 0.077, 3},
		{"c6g.xlarge", 4, 8192, types.ArchitectureTypeArm64, 4, 15, 0, 0.136, 3},
		{"g4dn.xlarge", 4, 16384, types.ArchitectureTypeX8664, 3, 10, 1, 0.526, 2},
	}
	zones := []string{region + "a", region + "b", region + "c"}
	c := &Catalog{Types: map[string]types.InstanceTypeInfo{}, Offerings: map[string][]string{}, OnDemand: map[string]float64{}}
	for _, s := range specs {
		info := types.InstanceTypeInfo{
			InstanceType:                 types.InstanceType(s.name),
			CurrentGeneration:            aws.Bool(true),
			BareMetal:                    aws.Bool(false),
			Hypervisor:                   types.InstanceTypeHypervisorNitro,
			VCpuInfo:                     &types.VCpuInfo{DefaultVCpus: aws.Int32(s.vcpu), DefaultCores: aws.Int32(s.vcpu / 2), DefaultThreadsPerCore: aws.Int32(2)},
			MemoryInfo:                   &types.MemoryInfo{SizeInMiB: aws.Int64(s.memMiB)},
			ProcessorInfo:                &types.ProcessorInfo{SupportedArchitectures: []types.ArchitectureType{s.arch}},
			NetworkInfo:                  &types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(s.enis), Ipv4AddressesPerInterface: aws.Int32(s.ips), NetworkPerformance: aws.String("Up to 10 Gigabit")},
			SupportedUsageClasses:        []types.UsageClassType{types.UsageClassTypeOnDemand, types.UsageClassTypeSpot},
			SupportedVirtualizationTypes: []types.VirtualizationType{types.VirtualizationTypeHvm},
		}
		if s.gpus > 0 {
			info.GpuInfo = &types.GpuInfo{Gpus: []types.GpuDeviceInfo{{Name: aws.String("T4"), Manufacturer: aws.String("NVIDIA"), Count: aws.Int32(s.gpus), MemoryInfo: &types.GpuDeviceMemoryInfo{SizeInMiB: aws.Int32(16384)}}}, TotalGpuMemoryInMiB: aws.Int32(16384)}
		}
		c.Types[s.name] = info
		c.Offerings[s.name] = zones[:s.zonesLimit]
		c.OnDemand[s.name] = s.price
	}
	return c
}
