// Package doctor checks a real AWS account for what a nodewright stack
// needs, read-only and with the caller's own credentials: the cluster and
// its authentication mode, the stack's access entries, the subnets,
// security groups and AMIs the EC2NodeClasses select, the spot
// service-linked role, the quotas that would block a launch, the deployed
// roles' policies as IAM itself evaluates them (iam:SimulatePrincipalPolicy
// for the exact requests nodewright's launch path makes) and DryRun calls
// of those requests. Before `cdk deploy` the checks of the stack warn; after
// it they must pass. Every AWS call goes through the small interfaces of
// Clients, so the local cloud's simulator answers them in tests.
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// Status is a check's outcome.
type Status string

const (
	Pass Status = "pass"
	// Warn: not a blocker now (the stack is not deployed yet, a check had
	// nothing to try), but worth reading.
	Warn Status = "warn"
	// Fail: a launch (or the deployment) would fail; Fix says what to do.
	Fail Status = "fail"
)

// Check is one line of the report.
type Check struct {
	Name    string `json:"name"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Report is every check, in the order they ran.
type Report struct {
	Cluster  string `json:"cluster"`
	Region   string `json:"region"`
	Stack    string `json:"stack"`
	Deployed bool   `json:"deployed"`
	// Outputs are the deployed stack's outputs (none before deploy).
	Outputs map[string]string `json:"outputs,omitempty"`
	Checks  []Check           `json:"checks"`
}

// Failed reports whether any check failed.
func (r *Report) Failed() bool {
	for _, c := range r.Checks {
		if c.Status == Fail {
			return true
		}
	}
	return false
}

// Find returns the first check named name (or whose name starts with
// name + "/"), for tests and callers that act on one.
func (r *Report) Find(name string) (Check, bool) {
	for _, c := range r.Checks {
		if c.Name == name || strings.HasPrefix(c.Name, name+"/") {
			return c, true
		}
	}
	return Check{}, false
}

func (r *Report) add(c Check) { r.Checks = append(r.Checks, c) }

// WriteText prints one line per check (status, name, message) and, under a
// check that did not pass, its fix.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, c := range r.Checks {
		fmt.Fprintf(&b, "%-4s  %-38s %s\n", strings.ToUpper(string(c.Status)), c.Name, c.Message)
		if c.Fix != "" && c.Status != Pass {
			fmt.Fprintf(&b, "      %-38s fix: %s\n", "", c.Fix)
		}
	}
	pass, warn, fail := r.Counts()
	fmt.Fprintf(&b, "\n%d passed, %d warned, %d failed (cluster %s, %s, stack %s)\n", pass, warn, fail, r.Cluster, r.Region, r.Stack)
	_, err := io.WriteString(w, b.String())
	return err
}

// Counts are how many checks passed, warned and failed.
func (r *Report) Counts() (pass, warn, fail int) {
	for _, c := range r.Checks {
		switch c.Status {
		case Pass:
			pass++
		case Warn:
			warn++
		case Fail:
			fail++
		}
	}
	return pass, warn, fail
}

// WriteJSON prints the report as one JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// EKSAPI is the part of the EKS client doctor uses.
type EKSAPI interface {
	nwaws.EKSAPI
	ListAccessEntries(context.Context, *eks.ListAccessEntriesInput, ...func(*eks.Options)) (*eks.ListAccessEntriesOutput, error)
	DescribeAccessEntry(context.Context, *eks.DescribeAccessEntryInput, ...func(*eks.Options)) (*eks.DescribeAccessEntryOutput, error)
}

// IAMAPI is the part of the IAM client doctor uses.
type IAMAPI interface {
	GetRole(context.Context, *iam.GetRoleInput, ...func(*iam.Options)) (*iam.GetRoleOutput, error)
	SimulatePrincipalPolicy(context.Context, *iam.SimulatePrincipalPolicyInput, ...func(*iam.Options)) (*iam.SimulatePrincipalPolicyOutput, error)
}

// QuotasAPI is the part of the Service Quotas client doctor uses.
type QuotasAPI interface {
	GetServiceQuota(context.Context, *servicequotas.GetServiceQuotaInput, ...func(*servicequotas.Options)) (*servicequotas.GetServiceQuotaOutput, error)
}

// LambdaAPI is the part of the Lambda client doctor uses.
type LambdaAPI interface {
	GetAccountSettings(context.Context, *lambda.GetAccountSettingsInput, ...func(*lambda.Options)) (*lambda.GetAccountSettingsOutput, error)
}

// ErrNoStack is what StackOutputs answers for a stack that does not exist.
var ErrNoStack = errors.New("stack does not exist")

// StackOutputs reads a CloudFormation stack's outputs (OutputKey ->
// OutputValue); it returns an error wrapping ErrNoStack when there is no
// such stack.
type StackOutputs func(ctx context.Context, stack string) (map[string]string, error)

// Clients are the AWS APIs doctor calls, with the caller's credentials.
type Clients struct {
	EC2    nwaws.EC2API
	SSM    nwaws.SSMAPI
	EKS    EKSAPI
	IAM    IAMAPI
	Quotas QuotasAPI
	Lambda LambdaAPI
	Stacks StackOutputs
}

// Options say what to check.
type Options struct {
	Cluster string
	Region  string
	// Config is the configuration directory's NodePools and EC2NodeClasses
	// (internal/apis), the ones the stack deploys.
	Config *apis.Config
	// StackName defaults to nodewright-<cluster>, the CDK app's.
	StackName string
}

// StackName is the CDK app's stack name for a cluster.
func StackName(cluster string) string { return "nodewright-" + cluster }

// Run runs every check and returns the report; it fails only on bad
// options (an AWS error is a failed check).
func Run(ctx context.Context, o Options, c Clients) (*Report, error) {
	if o.Cluster == "" || o.Region == "" || o.Config == nil {
		return nil, errors.New("doctor: a cluster, a region and the configuration are required")
	}
	if o.StackName == "" {
		o.StackName = StackName(o.Cluster)
	}
	e := newEnv(ctx, o, c)
	e.checkCluster(ctx)
	e.checkStack(ctx)
	e.checkAccessEntries(ctx)
	for _, nc := range o.Config.NodeClasses {
		e.checkNodeClass(ctx, nc)
	}
	e.checkSpotRole(ctx)
	e.checkLambdaConcurrency(ctx)
	e.checkVCPUQuotas(ctx)
	e.checkOtherOwners(ctx)
	probes := e.probeLaunches(ctx)
	e.checkRoles(ctx, probes)
	e.checkDryRuns(ctx, probes)
	return e.report, nil
}
