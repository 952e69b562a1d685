package doctor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

// Result is IAM's verdict on one Request (an EvaluationResult of
// iam:SimulatePrincipalPolicy).
type Result struct {
	Request
	// Decision is allowed, implicitDeny or explicitDeny.
	Decision string
	// Matched are the policies whose statements decided.
	Matched []string
	// Missing are context keys the policies ask for that the request did
	// not give (a sign the request differs from what the policy expects).
	Missing []string
}

// Allowed reports whether IAM allows the request.
func (r Result) Allowed() bool {
	return r.Decision == string(iamtypes.PolicyEvaluationDecisionTypeAllowed)
}

func (r Result) String() string {
	s := fmt.Sprintf("%s on %s (%s; %s)", r.Action, r.Resource, r.Decision, r.Why)
	if len(r.Missing) > 0 {
		s += " missing context " + strings.Join(r.Missing, ",")
	}
	return s
}

// Simulate asks IAM to evaluate each request under the principal's
// policies (iam:SimulatePrincipalPolicy, one action and resource a call,
// with the request's context entries).
func Simulate(ctx context.Context, api IAMAPI, principal string, reqs []Request) ([]Result, error) {
	reqs = dedupe(reqs)
	out := make([]Result, 0, len(reqs))
	for _, r := range reqs {
		in := &iam.SimulatePrincipalPolicyInput{PolicySourceArn: sdkaws.String(principal), ActionNames: []string{r.Action}}
		if r.Resource != "" && r.Resource != "*" {
			in.ResourceArns = []string{r.Resource}
		}
		for _, k := range sortedKeys(r.Context) {
			if len(r.Context[k]) == 0 {
				continue // the API takes no key without a value
			}
			kind := iamtypes.ContextKeyTypeEnumString
			if k == "aws:TagKeys" {
				kind = iamtypes.ContextKeyTypeEnumStringList
			}
			in.ContextEntries = append(in.ContextEntries, iamtypes.ContextEntry{ContextKeyName: sdkaws.String(k), ContextKeyType: kind, ContextKeyValues: r.Context[k]})
		}
		resp, err := api.SimulatePrincipalPolicy(ctx, in)
		if err != nil {
			return out, fmt.Errorf("simulate %s on %s as %s: %w", r.Action, r.Resource, principal, err)
		}
		res := Result{Request: r, Decision: string(iamtypes.PolicyEvaluationDecisionTypeImplicitDeny)}
		for _, ev := range resp.EvaluationResults {
			res.Decision = string(ev.EvalDecision)
			for _, m := range ev.MatchedStatements {
				res.Matched = append(res.Matched, str(m.SourcePolicyId))
			}
			res.Missing = append(res.Missing, ev.MissingContextValues...)
		}
		out = append(out, res)
	}
	return out, nil
}

// dedupe keeps the first of requests that ask the same (action, resource
// and context): two probes share their reads and most of their launch.
func dedupe(reqs []Request) []Request {
	seen := map[string]bool{}
	var out []Request
	for _, r := range reqs {
		k := r.Action + " " + r.Resource
		for _, c := range sortedKeys(r.Context) {
			k += " " + c + "=" + strings.Join(r.Context[c], ",")
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, r)
		}
	}
	return out
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// storeActions are what internal/store calls on the table (infra's).
var storeActions = []string{"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query", "dynamodb:Scan"}

// regionalReads are the EC2 reads of the launch path and its discovery.
var regionalReads = []string{"ec2:DescribeAvailabilityZones", "ec2:DescribeCapacityReservations", "ec2:DescribeImages",
	"ec2:DescribeInstances", "ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates",
	"ec2:DescribePlacementGroups", "ec2:DescribeSecurityGroups", "ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"}

func (e *env) arns() ARNs {
	return ARNs{Partition: e.partition, Region: e.o.Region, Account: e.account}
}

func (e *env) clusterARN() string {
	return fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", e.partition, e.o.Region, e.account, e.o.Cluster)
}

func (e *env) tableARN() string { return e.owner() }

// queueARN is the ARN of a queue given by its URL.
func (e *env) queueARN(url string) string {
	return fmt.Sprintf("arn:%s:sqs:%s:%s:%s", e.partition, e.o.Region, e.account, url[strings.LastIndex(url, "/")+1:])
}

// controllerRequests: every probe's launch, the reads, the table and the
// queues the four controller functions use.
func (e *env) controllerRequests(probes []*Probe) []Request {
	a := e.arns()
	var out []Request
	for _, pr := range probes {
		role := ""
		if pr.NodeClass.Spec.Role != "" {
			role = e.roleARN(pr.NodeClass.Spec.Role)
		}
		out = append(out, LaunchRequests(pr, a, role)...)
		for _, p := range pr.Parameters {
			out = append(out, a.request("ssm:GetParameter", e.parameterARN(p), "AMI selection reads "+p, nil))
		}
	}
	for _, act := range regionalReads {
		out = append(out, a.request(act, "*", "discovery and launch reads", nil))
	}
	out = append(out, a.request("eks:DescribeCluster", e.clusterARN(), "every function finds the cluster", nil),
		a.request("pricing:GetProducts", "*", "prices", nil))
	for _, act := range storeActions {
		out = append(out, a.request(act, e.tableARN(), "the NodeClaim table", nil))
	}
	for _, q := range []string{outInterruptQ, outWorkQ, outProvisionQ, outDisruptionQ} {
		if url := e.outputs[q]; url != "" {
			for _, act := range []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:GetQueueAttributes"} {
				out = append(out, a.request(act, e.queueARN(url), "the event source of "+q, nil))
			}
			if q != outInterruptQ {
				out = append(out, a.request("sqs:SendMessage", e.queueARN(url), "requeues and nudges on "+q, nil))
			}
		}
	}
	return out
}

// parameterARN: AWS's public parameters have no account in their ARN.
func (e *env) parameterARN(name string) string {
	if strings.HasPrefix(name, "arn:") {
		return name
	}
	account := e.account
	if strings.HasPrefix(name, "/aws/") {
		account = ""
	}
	return fmt.Sprintf("arn:%s:ssm:%s:%s:parameter/%s", e.partition, e.o.Region, account, strings.TrimPrefix(name, "/"))
}

// checkRoles evaluates each deployed role's policies with
// SimulatePrincipalPolicy for the requests its functions make.
func (e *env) checkRoles(ctx context.Context, probes []*Probe) {
	a := e.arns()
	roles := []struct {
		name, output string
		reqs         []Request
	}{
		{"controller", outControllerRo, e.controllerRequests(probes)},
		{"webhook", outWebhookRole, []Request{a.request("sqs:SendMessage", e.queueARN(e.outputs[outProvisionQ]), "the webhook's nudge", nil)}},
		{"registrar", outRegistrarRo, []Request{a.request("eks:DescribeCluster", e.clusterARN(), "the registrar finds the cluster", nil),
			a.request("dynamodb:Query", e.tableARN(), "the registrar lists claims on delete", nil)}},
	}
	for _, r := range roles {
		name := "iam/" + r.name
		if !e.deployed() {
			e.warn(name, e.deployCommand(), "the %s role's policy is evaluated (iam:SimulatePrincipalPolicy) once the stack is deployed", r.name)
			continue
		}
		arn := e.outputs[r.output]
		results, err := Simulate(ctx, e.c.IAM, arn, r.reqs)
		if err != nil {
			e.fail(name, "your credentials need iam:SimulatePrincipalPolicy on "+arn, "%v", err)
			continue
		}
		e.reportResults(name, arn, results)
	}
}

func (e *env) reportResults(name, arn string, results []Result) {
	var denied []string
	for _, r := range results {
		if !r.Allowed() {
			denied = append(denied, r.String())
		}
	}
	if len(denied) == 0 {
		e.pass(name, "%s allows all %d requests its functions make (simulated by IAM)", arn, len(results))
		return
	}
	shown := denied
	if len(shown) > 3 {
		shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(denied)-3))
	}
	e.fail(name, "deploy the stack again with this version ("+e.deployCommand()+"); if it is deployed with this version, a permissions boundary, an SCP or an edit of the role's policy denies it",
		"%s denies %d of %d requests: %s", arn, len(denied), len(results), strings.Join(shown, "; "))
}
