package awssim

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

var regionNames = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-1": "US West (N. California)",
	"us-west-2": "US West (Oregon)", "eu-west-1": "EU (Ireland)", "eu-central-1": "EU (Frankfurt)",
}

// handlePricing serves GetProducts for AmazonEC2 Linux on-demand products in
// the price-list JSON document shape, one document per instance type.
func (s *Server) handlePricing(op string, body []byte) (any, error) {
	if op != "GetProducts" {
		return nil, protocol.Errorf("UnknownOperationException", "Pricing operation %s is not simulated", op)
	}
	var in struct {
		ServiceCode, FormatVersion, NextToken string
		MaxResults                            *int
		Filters                               []struct{ Type, Field, Value string }
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, protocol.Errorf("InvalidParameterException", "invalid JSON body: %v", err)
	}
	if in.ServiceCode != "AmazonEC2" {
		return map[string]any{"FormatVersion": "aws_v1", "PriceList": []string{}}, nil
	}
	for _, f := range in.Filters {
		if f.Type != "TERM_MATCH" && f.Type != "" {
			return nil, protocol.Errorf("InvalidParameterException", "filter type %s is not supported", f.Type)
		}
	}
	cat := s.ec2.Config().Catalog
	var docs []string
	for _, name := range cat.TypeNames() {
		price, ok := cat.OnDemand[name]
		if !ok {
			continue
		}
		attrs := s.productAttributes(name)
		match := true
		for _, f := range in.Filters {
			v, ok := attrs[strings.ToLower(f.Field)]
			match = match && ok && strings.EqualFold(v, f.Value)
		}
		if match {
			docs = append(docs, s.priceDocument(name, price, attrs))
		}
	}
	start := 0
	if in.NextToken != "" {
		n, err := strconv.Atoi(in.NextToken)
		if err != nil || n < 0 || n > len(docs) {
			return nil, protocol.Errorf("InvalidNextTokenException", "The next token is invalid.")
		}
		start = n
	}
	max := 100
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 100 {
			return nil, protocol.Errorf("InvalidParameterException", "MaxResults must be between 1 and 100")
		}
		max = *in.MaxResults
	}
	end := start + max
	out := map[string]any{"FormatVersion": "aws_v1"}
	if end < len(docs) {
		out["NextToken"] = strconv.Itoa(end)
	} else {
		end = len(docs)
	}
	out["PriceList"] = docs[start:end]
	return out, nil
}

// productAttributes are the price list attributes, keyed by lower-case name.
func (s *Server) productAttributes(name string) map[string]string {
	info := s.ec2.Config().Catalog.Types[name]
	vcpu, mem := "", ""
	if info.VCpuInfo != nil && info.VCpuInfo.DefaultVCpus != nil {
		vcpu = strconv.Itoa(int(*info.VCpuInfo.DefaultVCpus))
	}
	if info.MemoryInfo != nil && info.MemoryInfo.SizeInMiB != nil {
		mem = strconv.FormatFloat(float64(*info.MemoryInfo.SizeInMiB)/1024, 'f', -1, 64) + " GiB"
	}
	loc := regionNames[s.opts.Region]
	if loc == "" {
		loc = s.opts.Region
	}
	return map[string]string{
		"servicecode": "AmazonEC2", "productfamily": "Compute Instance", "instancetype": name, "regioncode": s.opts.Region,
		"location": loc, "locationtype": "AWS Region", "operatingsystem": "Linux", "preinstalledsw": "NA",
		"capacitystatus": "Used", "tenancy": "Shared", "licensemodel": "No License required", "marketoption": "OnDemand",
		"vcpu": vcpu, "memory": mem, "usagetype": "BoxUsage:" + name, "operation": "RunInstances", "servicename": "Amazon Elastic Compute Cloud",
	}
}

// attrNames restores the price list's camelCase attribute names.
var attrNames = map[string]string{
	"servicecode": "servicecode", "productfamily": "productFamily", "instancetype": "instanceType", "regioncode": "regionCode",
	"location": "location", "locationtype": "locationType", "operatingsystem": "operatingSystem", "preinstalledsw": "preInstalledSw",
	"capacitystatus": "capacitystatus", "tenancy": "tenancy", "licensemodel": "licenseModel", "marketoption": "marketoption",
	"vcpu": "vcpu", "memory": "memory", "usagetype": "usagetype", "operation": "operation", "servicename": "servicename",
}

func (s *Server) priceDocument(name string, price float64, attrs map[string]string) string {
	h := fnv.New64a()
	h.Write([]byte(s.opts.Region + "/" + name))
	sku := strings.ToUpper(strconv.FormatUint(h.Sum64(), 36))
	const term = "JRTCKXETXF"
	named := map[string]string{}
	for k, v := range attrs {
		named[attrNames[k]] = v
	}
	doc := map[string]any{
		"product":     map[string]any{"productFamily": "Compute Instance", "attributes": named, "sku": sku},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{"OnDemand": map[string]any{sku + "." + term: map[string]any{
			"priceDimensions": map[string]any{sku + "." + term + ".6YS6EN2CT7": map[string]any{
				"unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": []string{},
				"description":  fmt.Sprintf("$%.4f per On Demand Linux %s Instance Hour", price, name),
				"rateCode":     sku + "." + term + ".6YS6EN2CT7",
				"pricePerUnit": map[string]string{"USD": strconv.FormatFloat(price, 'f', 10, 64)},
			}},
			"sku": sku, "effectiveDate": "2026-07-01T00:00:00Z", "offerTermCode": term, "termAttributes": map[string]string{},
		}}},
		"version": "20260701000000", "publicationDate": "2026-07-01T00:00:00Z",
	}
	b, _ := json.Marshal(doc)
	return string(b)
}
