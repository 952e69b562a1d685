package awssim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// quotaDefault is a quota's name and the value the simulator reports until
// a test sets another (SetServiceQuota).
type quotaDefault struct {
	name  string
	value float64
}

// defaultQuotas are the EC2 vCPU quotas (Service Quotas console, service
// "Amazon Elastic Compute Cloud (Amazon EC2)"; EC2 user guide, "Amazon EC2
// service quotas": On-Demand and Spot limits are counted in vCPUs per
// instance family group) and Lambda's concurrency, with values an account
// that has run EKS workloads typically has.
var defaultQuotas = map[string]quotaDefault{
	"ec2/L-1216C47A":    {"Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances", 640},
	"ec2/L-34B43A08":    {"All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests", 640},
	"ec2/L-DB2E81BA":    {"Running On-Demand G and VT instances", 64},
	"ec2/L-3819A6DF":    {"All G and VT Spot Instance Requests", 64},
	"ec2/L-417A185B":    {"Running On-Demand P instances", 64},
	"ec2/L-7212CCBC":    {"All P Spot Instance Requests", 64},
	"ec2/L-7295265B":    {"Running On-Demand X instances", 64},
	"ec2/L-E3A00192":    {"All X Spot Instance Requests", 64},
	"ec2/L-74FC7D96":    {"Running On-Demand F instances", 64},
	"ec2/L-88CF9481":    {"All F Spot Instance Requests", 64},
	"ec2/L-1945791B":    {"Running On-Demand Inf instances", 64},
	"ec2/L-B5D1601B":    {"All Inf Spot Instance Requests", 64},
	"ec2/L-6E869C2A":    {"Running On-Demand DL instances", 64},
	"ec2/L-85EED4F7":    {"All DL Spot Instance Requests", 64},
	"ec2/L-2C3B7624":    {"Running On-Demand Trn instances", 64},
	"ec2/L-6B0D517C":    {"All Trn Spot Instance Requests", 64},
	"ec2/L-F7808C92":    {"Running On-Demand HPC instances", 64},
	"lambda/L-B99A9384": {"Concurrent executions", 1000},
}

// handleServiceQuotas answers GetServiceQuota (Service Quotas API
// reference): the applied value of a quota, or NoSuchResourceException for
// a code the service does not have.
func (s *Server) handleServiceQuotas(op string, body []byte) (any, error) {
	if op != "GetServiceQuota" {
		return nil, protocol.Errorf("UnknownOperationException", "Service Quotas %s is not simulated", op)
	}
	var in struct{ ServiceCode, QuotaCode string }
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, protocol.Errorf("ValidationException", "%s", err.Error())
	}
	key := in.ServiceCode + "/" + in.QuotaCode
	def, ok := defaultQuotas[key]
	if !ok {
		return nil, &protocol.APIError{Code: "NoSuchResourceException", Status: http.StatusBadRequest,
			Message: fmt.Sprintf("The request failed because the specified service or quota does not exist: %s", key)}
	}
	value, _ := s.quota(key)
	return map[string]any{"Quota": map[string]any{
		"ServiceCode": in.ServiceCode, "QuotaCode": in.QuotaCode, "QuotaName": def.name, "Value": value,
		"Unit": "None", "Adjustable": true, "GlobalQuota": false,
		"QuotaArn": fmt.Sprintf("arn:aws:servicequotas:%s:%s:%s/%s", s.opts.Region, s.opts.AccountID, in.ServiceCode, in.QuotaCode),
	}}, nil
}

// quota is the applied value of a quota ("service/code"): the one a test
// set, else its default; false for a quota the simulator does not have.
func (s *Server) quota(key string) (float64, bool) {
	def, ok := defaultQuotas[key]
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	if v, set := a.quotas[key]; set {
		return v, true
	}
	return def.value, ok
}

// RaiseEC2VCPUQuotas sets every EC2 vCPU quota (On-Demand and Spot, each
// family group) to v.
func (s *Server) RaiseEC2VCPUQuotas(v float64) {
	for key := range defaultQuotas {
		if service, code, _ := strings.Cut(key, "/"); service == "ec2" {
			s.SetServiceQuota(service, code, v)
		}
	}
}
