package catalog

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// File names of a catalog folder (the layout of ../shared/aws-data).
const (
	fileInstanceTypes = "instance-types.json.gz"
	// Prices are only published for some regions; the us-east-1 list price is
	// the documented fallback (EC2 list prices of the common families are the
	// same in us-east-1, us-east-2 and us-west-2).
	fallbackPriceRegion = "us-east-1"
)

func offeringsFile(region string) string { return "offerings-" + region + ".json" }
func pricesFile(region string) string    { return "on-demand-prices-" + region + ".json" }
func zonesFile(region string) string     { return "zones-" + region + ".json" }

// LoadDir reads a folder laid out like ../shared/aws-data:
//
//	instance-types.json.gz          DescribeInstanceTypes InstanceTypeInfo objects keyed by type name
//	offerings-<region>.json         DescribeInstanceTypeOfferings: [{"InstanceType","Location"}]
//	on-demand-prices-<region>.json  {"m5.large": 0.096, ...} Linux on-demand $/hour
//	zones-<region>.json (optional)  [{"name":"us-east-1a","id":"use1-az6"}]
//
// Spot prices are derived (PriceSourceDerivedSpot). When the region has no
// price file the us-east-1 one is used and the source says so.
func LoadDir(dir, region string) (*Catalog, error) {
	c, err := LoadFS(os.DirFS(dir), region, PriceSourceAWSData)
	if err != nil {
		return nil, fmt.Errorf("load catalog from %s: %w", dir, err)
	}
	return c, nil
}

// LoadFS is LoadDir over any fs.FS; source labels the on-demand prices.
func LoadFS(fsys fs.FS, region, source string) (*Catalog, error) {
	in, err := ReadEC2Data(fsys, region, source)
	if err != nil {
		return nil, err
	}
	return FromEC2(in)
}

// ReadEC2Data reads a catalog folder into the EC2 API shapes FromEC2 takes,
// for callers that need the raw shapes too (the AWS simulator serves
// DescribeInstanceTypes from them). source labels the on-demand prices.
func ReadEC2Data(fsys fs.FS, region, source string) (EC2Input, error) {
	if region == "" {
		return EC2Input{}, errors.New("region is empty")
	}
	infos, err := readInstanceTypes(fsys)
	if err != nil {
		return EC2Input{}, err
	}
	var rawOfferings []struct {
		InstanceType string
		Location     string
	}
	if err := readJSON(fsys, offeringsFile(region), &rawOfferings); err != nil {
		return EC2Input{}, err
	}
	offerings := make([]ec2types.InstanceTypeOffering, len(rawOfferings))
	for i, o := range rawOfferings {
		if o.InstanceType == "" || o.Location == "" {
			return EC2Input{}, fmt.Errorf("%s: entry %d lacks InstanceType or Location", offeringsFile(region), i)
		}
		loc := o.Location
		offerings[i] = ec2types.InstanceTypeOffering{InstanceType: ec2types.InstanceType(o.InstanceType), Location: &loc,
			LocationType: ec2types.LocationTypeAvailabilityZone}
	}
	var prices map[string]float64
	priceSource := source
	err = readJSON(fsys, pricesFile(region), &prices)
	if errors.Is(err, fs.ErrNotExist) && region != fallbackPriceRegion {
		if err2 := readJSON(fsys, pricesFile(fallbackPriceRegion), &prices); err2 != nil {
			return EC2Input{}, fmt.Errorf("no on-demand prices for %s (%w) and no %s fallback: %w", region, err, fallbackPriceRegion, err2)
		}
		priceSource = source + " (" + fallbackPriceRegion + " list price)"
	} else if err != nil {
		return EC2Input{}, err
	}
	for name, p := range prices {
		if p < 0 {
			return EC2Input{}, fmt.Errorf("on-demand price of %s is negative (%v)", name, p)
		}
	}
	var zones map[string]string
	var rawZones []Zone
	if err := readJSON(fsys, zonesFile(region), &rawZones); err == nil {
		zones = map[string]string{}
		for _, z := range rawZones {
			zones[z.Name] = z.ID
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return EC2Input{}, err
	}
	return EC2Input{
		Region: region, InstanceTypes: infos, Offerings: offerings, Zones: zones,
		OnDemand: prices, OnDemandSource: priceSource,
	}, nil
}

func readInstanceTypes(fsys fs.FS) ([]ec2types.InstanceTypeInfo, error) {
	f, err := fsys.Open(fileInstanceTypes)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileInstanceTypes, err)
	}
	var byName map[string]ec2types.InstanceTypeInfo
	if err := json.NewDecoder(zr).Decode(&byName); err != nil {
		return nil, fmt.Errorf("%s: %w", fileInstanceTypes, err)
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]ec2types.InstanceTypeInfo, 0, len(names))
	for _, n := range names {
		info := byName[n]
		if info.InstanceType == "" {
			info.InstanceType = ec2types.InstanceType(n)
		} else if string(info.InstanceType) != n {
			return nil, fmt.Errorf("%s: key %q holds instance type %q", fileInstanceTypes, n, info.InstanceType)
		}
		out = append(out, info)
	}
	return out, nil
}

func readJSON(fsys fs.FS, name string, v any) error {
	f, err := fsys.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Errorf("read %s: %w", name, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("parse %s: %w", name, err)
	}
	return nil
}
