package doctor

import (
	"context"
	"fmt"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Stack outputs doctor reads (infra's outputs).
const (
	outTable        = "TableName"
	outNodeRoleArn  = "NodeRoleArn"
	outControllerRo = "ControllerRoleArn"
	outWebhookRole  = "WebhookRoleArn"
	outRegistrarRo  = "RegistrarRoleArn"
	outProvisionQ   = "ProvisionQueueUrl"
	outWorkQ        = "WorkQueueUrl"
	outInterruptQ   = "InterruptionQueueUrl"
	outDisruptionQ  = "DisruptionQueueUrl"
)

// env is one run's state: what the first checks learned, for the later ones.
type env struct {
	o      Options
	c      Clients
	report *Report

	cluster            *ekstypes.Cluster // nil when DescribeCluster failed
	partition, account string
	outputs            map[string]string // nil before deploy

	provider *nwaws.Provider
	cat      *catalog.Catalog
	catErr   error
}

func newEnv(_ context.Context, o Options, c Clients) *env {
	return &env{o: o, c: c, partition: "aws", report: &Report{Cluster: o.Cluster, Region: o.Region, Stack: o.StackName}}
}

func (e *env) pass(name, format string, args ...any) {
	e.report.add(Check{Name: name, Status: Pass, Message: fmt.Sprintf(format, args...)})
}

func (e *env) warn(name, fix, format string, args ...any) {
	e.report.add(Check{Name: name, Status: Warn, Message: fmt.Sprintf(format, args...), Fix: fix})
}

func (e *env) fail(name, fix, format string, args ...any) {
	e.report.add(Check{Name: name, Status: Fail, Message: fmt.Sprintf(format, args...), Fix: fix})
}

// deployed reports whether the stack exists (its outputs were read).
func (e *env) deployed() bool { return e.outputs != nil }

// owner is the stack's owner value (settings.Owner: the table's ARN), or a
// placeholder of the same shape before deploy.
func (e *env) owner() string {
	table := e.outputs[outTable]
	if table == "" {
		table = e.o.StackName + "-not-deployed"
	}
	return fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", e.partition, e.o.Region, e.account, table)
}

// deployCommand is the fix for whatever the stack creates.
func (e *env) deployCommand() string {
	return fmt.Sprintf("infra/node_modules/.bin/cdk deploy -c clusterName=%s -c configDir=<your configDir>, then run nodewright doctor again", e.o.Cluster)
}

// aws is nodewright's own EC2 launch path over the caller's clients: its
// discovery is what the functions will see.
func (e *env) aws() *nwaws.Provider {
	if e.provider == nil {
		p, err := nwaws.New(nwaws.Options{ClusterName: e.o.Cluster, Region: e.o.Region, Owner: e.owner(), Logger: quiet},
			nwaws.Clients{EC2: e.c.EC2, SSM: e.c.SSM, EKS: e.c.EKS}, nil)
		if err != nil {
			panic(err) // the options above are always complete
		}
		e.provider = p
	}
	return e.provider
}

// catalog is the region's instance types as the functions build them
// (DescribeInstanceTypes and offerings), read once.
func (e *env) catalog(ctx context.Context) (*catalog.Catalog, error) {
	if e.cat == nil && e.catErr == nil {
		e.cat, e.catErr = e.aws().Catalog(ctx, nil)
	}
	return e.cat, e.catErr
}

// arnParts reads the partition and account of an ARN.
func arnParts(arn string) (partition, account string, ok bool) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 6 || parts[0] != "arn" {
		return "", "", false
	}
	return parts[1], parts[4], true
}

// roleARN is the ARN of an EC2NodeClass's role (a name or an ARN).
func (e *env) roleARN(role string) string {
	if strings.HasPrefix(role, "arn:") {
		return role
	}
	return fmt.Sprintf("arn:%s:iam::%s:role/%s", e.partition, e.account, role)
}

// nodeRoles are the roles the EC2NodeClasses launch with, by ARN, with the
// access entry type each needs; a class naming an instance profile is
// left out (its role is known only from -c instanceProfileRoles).
func (e *env) nodeRoles() map[string]string {
	out := map[string]string{}
	if arn := e.outputs[outNodeRoleArn]; arn != "" {
		out[arn] = "EC2_LINUX"
	}
	for _, nc := range e.o.Config.NodeClasses {
		if nc.Spec.Role == "" {
			continue
		}
		arn := e.roleARN(nc.Spec.Role)
		if windows(nc) {
			out[arn] = "EC2_WINDOWS"
		} else if out[arn] == "" {
			out[arn] = "EC2_LINUX"
		}
	}
	return out
}

// windows: the class launches a Windows AMI family (infra's rule for
// EC2_WINDOWS access entries).
func windows(nc *apis.EC2NodeClass) bool {
	return strings.HasPrefix(strings.ToLower(nc.AMIFamily()), "windows")
}

func str(p *string) string { return sdkaws.ToString(p) }
