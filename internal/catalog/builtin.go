package catalog

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

//go:generate go run ./internal/gen -src ../../../shared/aws-data -out data
//go:generate go run ./internal/genpodeni

// data holds ~120 common current-generation types (c/m/r/t/g families, x86
// and Graviton, and a few accelerated types) with us-east-1 list prices and
// us-east-1 / us-west-2 offerings, written by internal/gen from aws-data.
//
//go:embed data
var data embed.FS

// BuiltinRegions lists the regions the embedded catalog covers.
func BuiltinRegions() []string {
	entries, _ := fs.ReadDir(data, "data")
	var out []string
	for _, e := range entries {
		if r, ok := strings.CutPrefix(e.Name(), "offerings-"); ok {
			out = append(out, strings.TrimSuffix(r, ".json"))
		}
	}
	sort.Strings(out)
	return out
}

// EmbeddedData is the embedded catalog folder (the aws-data layout plus
// zones-<region>.json), for ReadEC2Data or for serving it from a simulator.
func EmbeddedData() fs.FS {
	sub, err := fs.Sub(data, "data")
	if err != nil {
		panic(err) // "data" is a valid path; fs.Sub cannot fail on it
	}
	return sub
}

// Builtin returns the embedded catalog of region. Spot prices are derived
// (PriceSourceDerivedSpot); regions without their own price list use the
// us-east-1 list price and say so in the price source.
func Builtin(region string) (*Catalog, error) {
	sub := EmbeddedData()
	if _, err := fs.Stat(sub, offeringsFile(region)); err != nil {
		return nil, fmt.Errorf("embedded catalog has no region %q (have %s)", region, strings.Join(BuiltinRegions(), ", "))
	}
	c, err := LoadFS(sub, region, PriceSourceEmbedded)
	if err != nil {
		return nil, fmt.Errorf("embedded catalog %s: %w", region, err)
	}
	return c, nil
}
