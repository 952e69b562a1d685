// Package fidelity names the simulator's rules: each AWS behaviour the
// local cloud enforces because AWS documents it (or Karpenter learned it in
// production), with its source and the test that fails when the rule is
// off. ../FIDELITY.md is the readable table; TestFidelityTableListsEveryRule
// keeps the two the same.
//
// Every rule is on by default. NODEWRIGHT_SIM_RULES_OFF=name,... turns
// rules off, which is what `make sim-mutation` does, one rule at a time, to
// show that a named test needs each rule.
package fidelity

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// EnvRulesOff names the rules a simulator started from the environment
// leaves off (comma-separated rule names).
const EnvRulesOff = "NODEWRIGHT_SIM_RULES_OFF"

// The rule names. One constant a rule; the table below gives each its
// source and test.
const (
	FleetTagTypes         = "fleet-tag-types"
	TemplateTagTypes      = "template-tag-types"
	SpotTagsOnDemand      = "spot-tags-on-demand"
	TemplateRequestTags   = "template-request-tags"
	TagLimits             = "tag-limits"
	ReservedTagPrefix     = "reserved-tag-prefix"
	UserDataSize          = "user-data-size"
	ClientTokenLength     = "client-token-length"
	IdempotentMismatch    = "idempotent-mismatch"
	InsufficientCapacity  = "insufficient-capacity"
	UnfulfillableCapacity = "unfulfillable-capacity"
	MaxSpotInstanceCount  = "max-spot-instance-count"
	VcpuLimit             = "vcpu-limit"
	SpotMaxPrice          = "spot-max-price"
	SpotServiceLinkedRole = "spot-service-linked-role"
	KMSGrant              = "kms-grant"
	RequestThrottling     = "request-throttling"
	LaunchConsistency     = "launch-consistency"
)

// Rule is one enforced behaviour.
type Rule struct {
	Name string
	// Source is where AWS documents the behaviour, or the Karpenter issue
	// or PR that learned it.
	Source string
	// Package and Test name the test that fails when the rule is off
	// (go test <Package> -run <Test>).
	Package, Test string
}

// Rules is the table. Sources are quoted in full in FIDELITY.md.
func Rules() []Rule {
	const ec2sim, awssim = "./internal/localcloud/awssim/ec2sim", "./internal/localcloud/awssim"
	return []Rule{
		{FleetTagTypes, "EC2 API reference, CreateFleet TagSpecifications", awssim, "TestRuleFleetTagTypes"},
		{TemplateTagTypes, "EC2 API reference, LaunchTemplateTagSpecificationRequest", awssim, "TestRuleTemplateTagTypes"},
		{SpotTagsOnDemand, "aws/karpenter-provider-aws #5850", awssim, "TestRuleSpotTagsOnDemand"},
		{TemplateRequestTags, "aws/karpenter-provider-aws #4550; EC2 user guide, Grant permission to tag on create", awssim, "TestRuleTemplateRequestTags"},
		{TagLimits, "EC2 user guide, Tag restrictions; CreateTags API reference (50 tags per resource)", ec2sim, "TestRuleTagLimits"},
		{ReservedTagPrefix, "EC2 user guide, Tag restrictions (aws: prefix, any case)", ec2sim, "TestRuleReservedTagPrefix"},
		{UserDataSize, "EC2 user guide, Run commands at launch (16 KB before base64); kubernetes/kops #10202 (InvalidUserData.Malformed)", ec2sim, "TestRuleUserDataSize"},
		{ClientTokenLength, "EC2 API reference, Ensure idempotency (64 ASCII characters); CreateLaunchTemplate API reference (128)", ec2sim, "TestRuleClientTokenLength"},
		{IdempotentMismatch, "EC2 API reference, Ensure idempotency (IdempotentParameterMismatch)", awssim, "TestRuleIdempotentMismatch"},
		{InsufficientCapacity, "EC2 API reference, error codes (InsufficientInstanceCapacity)", awssim, "TestRuleInsufficientCapacity"},
		{UnfulfillableCapacity, "EC2 API reference, error codes; aws/karpenter-provider-aws PR #7998", awssim, "TestRuleUnfulfillableCapacity"},
		{MaxSpotInstanceCount, "EC2 API reference, error codes (MaxSpotInstanceCountExceeded)", awssim, "TestRuleMaxSpotInstanceCount"},
		{VcpuLimit, "EC2 API reference, error codes (VcpuLimitExceeded); EC2 user guide, On-Demand Instance quotas", awssim, "TestRuleVcpuLimit"},
		{SpotMaxPrice, "EC2 API reference, error codes (SpotMaxPriceTooLow)", awssim, "TestRuleSpotMaxPrice"},
		{SpotServiceLinkedRole, "EC2 user guide, Service-linked role for Spot Instance requests; aws/karpenter-provider-aws PR #7998", awssim, "TestRuleSpotServiceLinkedRole"},
		{KMSGrant, "Amazon EBS user guide, EBS encryption (permissions for IAM users); AWS KMS developer guide, kms:ViaService and kms:GrantIsForAWSResource; Karpenter troubleshooting, Node terminates before ready on failed encrypted EBS volume", awssim, "TestRuleKMSGrant"},
		{RequestThrottling, "EC2 developer guide, Request throttling for the Amazon EC2 API (token bucket sizes and refill rates)", awssim, "TestRuleRequestThrottling"},
		{LaunchConsistency, "EC2 developer guide, Eventual consistency in the Amazon EC2 API (InvalidInstanceID.NotFound after RunInstances); aws/karpenter-provider-aws instance.go Delete", awssim, "TestRuleLaunchConsistency"},
	}
}

// Set says which rules are on. The zero Set has every rule on.
type Set struct{ off map[string]bool }

// Off returns the Set with the named rules off; an unknown name is an
// error (a typo would otherwise leave the rule on and the mutation survive).
func Off(names ...string) (Set, error) {
	s := Set{off: map[string]bool{}}
	known := Names()
	for _, n := range names {
		if n = strings.TrimSpace(n); n == "" {
			continue
		}
		if !slices.Contains(known, n) {
			return Set{}, fmt.Errorf("simulator rule %q is not one of %s", n, strings.Join(known, ", "))
		}
		s.off[n] = true
	}
	return s, nil
}

// FromEnv is the Set NODEWRIGHT_SIM_RULES_OFF describes.
func FromEnv() (Set, error) {
	return Off(strings.Split(os.Getenv(EnvRulesOff), ",")...)
}

// On reports whether the rule is enforced.
func (s Set) On(name string) bool { return !s.off[name] }

// Names lists every rule's name, in table order.
func Names() []string {
	var out []string
	for _, r := range Rules() {
		out = append(out, r.Name)
	}
	return out
}

// WithEnv adds the rules NODEWRIGHT_SIM_RULES_OFF turns off to s, so a
// simulator a test configures in code still obeys a mutation run.
func (s Set) WithEnv() (Set, error) {
	env, err := FromEnv()
	if err != nil {
		return Set{}, err
	}
	out := Set{off: map[string]bool{}}
	for _, m := range []map[string]bool{s.off, env.off} {
		for n := range m {
			out.off[n] = true
		}
	}
	return out, nil
}
