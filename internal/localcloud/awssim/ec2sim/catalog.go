package ec2sim

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Catalog is what the simulated region sells: instance types, where they are
// offered and their on-demand prices. Spot prices are derived (see SpotPrice).
type Catalog struct {
	Types     map[string]types.InstanceTypeInfo
	Offerings map[string][]string // instance type -> zones
	OnDemand  map[string]float64  // instance type -> $/h (Linux)
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

// LoadAWSData reads the ../shared/aws-data layout: instance-types.json.gz,
// offerings-<region>.json and on-demand-prices-<region>.json (prices fall
// back to us-east-1's when the region has none).
func LoadAWSData(dir, region string) (*Catalog, error) {
	c := &Catalog{Types: map[string]types.InstanceTypeInfo{}, Offerings: map[string][]string{}, OnDemand: map[string]float64{}}
	f, err := os.Open(filepath.Join(dir, "instance-types.json.gz"))
	if err != nil {
		return nil, fmt.Errorf("load aws data: %w", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("load aws data: instance-types.json.gz: %w", err)
	}
	if err := json.NewDecoder(zr).Decode(&c.Types); err != nil {
		return nil, fmt.Errorf("load aws data: decode instance-types.json.gz: %w", err)
	}
	var offs []struct{ InstanceType, Location string }
	if err := readJSON(filepath.Join(dir, "offerings-"+region+".json"), &offs); err != nil {
		return nil, err
	}
	for _, o := range offs {
		if _, ok := c.Types[o.InstanceType]; ok {
			c.Offerings[o.InstanceType] = append(c.Offerings[o.InstanceType], o.Location)
		}
	}
	pricePath := filepath.Join(dir, "on-demand-prices-"+region+".json")
	if _, err := os.Stat(pricePath); err != nil {
		pricePath = filepath.Join(dir, "on-demand-prices-us-east-1.json")
	}
	if err := readJSON(pricePath, &c.OnDemand); err != nil {
		return nil, err
	}
	return c, nil
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("load aws data: %w", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("load aws data: decode %s: %w", filepath.Base(path), err)
	}
	return nil
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
