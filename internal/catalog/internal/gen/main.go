// Command gen writes the embedded catalog (internal/catalog/data) from a
// folder laid out like ../shared/aws-data. It is run by hand, or by
// `go generate ./internal/catalog`, when that data changes; the build never
// reads ../shared.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/nodewright/nodewright/internal/catalog"
)

// The families and sizes most NodePools select, x86 and Graviton, plus a few
// accelerated types so GPU, Neuron and EFA paths work offline.
var (
	generalFamilies = []string{"c5", "c6i", "c7i", "c6g", "c7g", "m5", "m6i", "m7i", "m6g", "m7g", "r5", "r6i", "r7i", "r6g", "r7g"}
	generalSizes    = []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge"}
	burstFamilies   = []string{"t3", "t3a", "t4g"}
	burstSizes      = []string{"small", "medium", "large", "xlarge", "2xlarge"}
	extraTypes      = []string{
		"g4dn.xlarge", "g4dn.2xlarge", "g4dn.4xlarge", "g4dn.12xlarge",
		"g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.12xlarge", "g5.48xlarge",
		"g6.xlarge", "g6.2xlarge", "g6.4xlarge", "g6.12xlarge",
		"p4d.24xlarge", "inf2.xlarge", "trn1.2xlarge",
		"c5.9xlarge", "c5.18xlarge",
	}
	// Zone IDs differ per account; these follow the az1.. order of the names.
	regions = []string{"us-east-1", "us-west-2"}
)

func main() {
	src := flag.String("src", filepath.Join("..", "..", "..", "..", "..", "shared", "aws-data"), "aws-data folder")
	out := flag.String("out", filepath.Join("..", "..", "data"), "output folder")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func wanted() []string {
	var names []string
	for _, f := range generalFamilies {
		for _, s := range generalSizes {
			names = append(names, f+"."+s)
		}
	}
	for _, f := range burstFamilies {
		for _, s := range burstSizes {
			names = append(names, f+"."+s)
		}
	}
	names = append(names, extraTypes...)
	sort.Strings(names)
	return names
}

func run(src, out string) error {
	raw, err := os.ReadFile(filepath.Join(src, "instance-types.json.gz"))
	if err != nil {
		return err
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.NewDecoder(zr).Decode(&all); err != nil {
		return fmt.Errorf("instance-types.json.gz: %w", err)
	}
	var prices map[string]float64
	if err := readJSON(filepath.Join(src, "on-demand-prices-us-east-1.json"), &prices); err != nil {
		return err
	}
	keep := map[string]bool{}
	subset := map[string]json.RawMessage{}
	subPrices := map[string]float64{}
	for _, n := range wanted() {
		info, ok := all[n]
		if !ok {
			// Not every family has every size (c5 has 18xlarge, not 16xlarge).
			fmt.Printf("skip %s: not in source data\n", n)
			continue
		}
		p, ok := prices[n]
		if !ok {
			return fmt.Errorf("instance type %s has no us-east-1 price", n)
		}
		keep[n] = true
		subset[n] = info
		subPrices[n] = p
	}
	if err := writeTypes(out, subset, subPrices); err != nil {
		return err
	}
	for _, region := range regions {
		if err := writeRegion(src, out, region, keep); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %d instance types for %v to %s\n", len(subset), regions, out)
	return nil
}

// writeTypes writes the kept instance types (gzipped) and their prices.
func writeTypes(out string, subset map[string]json.RawMessage, subPrices map[string]float64) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	enc := json.NewEncoder(zw)
	if err := enc.Encode(subset); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "instance-types.json.gz"), buf.Bytes(), 0o644); err != nil {
		return err
	}
	return writeJSON(filepath.Join(out, "on-demand-prices-us-east-1.json"), subPrices)
}

// writeRegion writes one region's offerings of the kept types, sorted, and
// every zone the source offerings name.
func writeRegion(src, out, region string, keep map[string]bool) error {
	var offerings []struct{ InstanceType, Location string }
	if err := readJSON(filepath.Join(src, "offerings-"+region+".json"), &offerings); err != nil {
		return err
	}
	zoneSet := map[string]bool{}
	var kept []struct{ InstanceType, Location string }
	for _, o := range offerings {
		zoneSet[o.Location] = true
		if keep[o.InstanceType] {
			kept = append(kept, o)
		}
	}
	sort.Slice(kept, func(i, j int) bool {
		if kept[i].InstanceType != kept[j].InstanceType {
			return kept[i].InstanceType < kept[j].InstanceType
		}
		return kept[i].Location < kept[j].Location
	})
	var zones []catalog.Zone
	for z := range zoneSet {
		if !strings.HasPrefix(z, region) {
			return fmt.Errorf("offerings-%s.json: zone %s is not in the region", region, z)
		}
		zones = append(zones, catalog.Zone{Name: z, ID: catalog.DefaultZoneID(z)})
	}
	sort.Slice(zones, func(i, j int) bool { return zones[i].Name < zones[j].Name })
	if err := writeJSON(filepath.Join(out, "offerings-"+region+".json"), kept); err != nil {
		return err
	}
	return writeJSON(filepath.Join(out, "zones-"+region+".json"), zones)
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
