package catalog

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// DerivedSpotPrice is the stand-in spot price used when no spot feed exists:
// a discount of 55-75% off on-demand, fixed per (type, zone) by a stable hash
// so plans are reproducible and zones differ like real spot markets do.
func DerivedSpotPrice(instanceType, zone string, onDemand float64) float64 {
	h := fnv.New64a()
	h.Write([]byte(instanceType))
	h.Write([]byte{0})
	h.Write([]byte(zone))
	frac := float64(h.Sum64()%10001) / 10000 // 0..1
	discount := 0.55 + 0.20*frac
	return math.Round(onDemand*(1-discount)*1e5) / 1e5
}

// priceListDoc is the part of a Pricing GetProducts PriceList document we read.
type priceListDoc struct {
	Product struct {
		ProductFamily string            `json:"productFamily"`
		Attributes    map[string]string `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				Unit         string            `json:"unit"`
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// ParseOnDemandPriceList reads Pricing GetProducts PriceList documents
// (service AmazonEC2) and returns the Linux, shared-tenancy, no-preinstalled-
// software, capacitystatus=Used on-demand hourly USD price per instance type.
// Documents for other products (other OS, reservations, ...) are skipped; a
// document that is not valid JSON or has an unparseable price is an error.
func ParseOnDemandPriceList(docs []string) (map[string]float64, error) {
	out := map[string]float64{}
	for i, raw := range docs {
		var d priceListDoc
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			return nil, fmt.Errorf("price list document %d: %w", i, err)
		}
		a := d.Product.Attributes
		name := a["instanceType"]
		if name == "" || !matchAttr(a, "operatingSystem", "Linux") || !matchAttr(a, "preInstalledSw", "NA") ||
			!matchAttr(a, "capacitystatus", "Used") || !matchAttr(a, "tenancy", "Shared") ||
			!matchAttr(a, "licenseModel", "No License required") {
			continue
		}
		for _, term := range d.Terms.OnDemand {
			for _, dim := range term.PriceDimensions {
				usd, ok := dim.PricePerUnit["USD"]
				if !ok || (dim.Unit != "" && dim.Unit != "Hrs") {
					continue
				}
				p, err := strconv.ParseFloat(usd, 64)
				if err != nil {
					return nil, fmt.Errorf("price list document %d (%s): USD price %q: %w", i, name, usd, err)
				}
				if p <= 0 {
					continue
				}
				if cur, ok := out[name]; !ok || p < cur {
					out[name] = p
				}
			}
		}
	}
	return out, nil
}

// matchAttr is true when the attribute is absent (older documents omit some)
// or equals want.
func matchAttr(a map[string]string, key, want string) bool {
	v, ok := a[key]
	return !ok || v == want
}

// SpotPricesFromHistory reduces DescribeSpotPriceHistory results to the most
// recent price per (type, zone).
func SpotPricesFromHistory(history []ec2types.SpotPrice) (map[SpotKey]float64, error) {
	out := map[SpotKey]float64{}
	latest := map[SpotKey]int64{}
	for i, h := range history {
		if h.AvailabilityZone == nil || h.SpotPrice == nil || h.InstanceType == "" {
			return nil, fmt.Errorf("spot price history entry %d: missing zone, type or price", i)
		}
		p, err := strconv.ParseFloat(*h.SpotPrice, 64)
		if err != nil {
			return nil, fmt.Errorf("spot price history entry %d (%s %s): price %q: %w", i, h.InstanceType, *h.AvailabilityZone, *h.SpotPrice, err)
		}
		k := SpotKey{string(h.InstanceType), *h.AvailabilityZone}
		var ts int64
		if h.Timestamp != nil {
			ts = h.Timestamp.UnixNano()
		}
		if prev, ok := latest[k]; !ok || ts >= prev {
			latest[k] = ts
			out[k] = p
		}
	}
	return out, nil
}
