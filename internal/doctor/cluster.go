package doctor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// minKubernetes is the oldest Kubernetes the webhook works with
// (matchConditions, README prerequisites).
const minKubernetes = 30

// checkCluster: the cluster exists, is ACTIVE with an endpoint, runs a
// Kubernetes the stack supports, and grants access through access entries
// (authentication mode API or API_AND_CONFIG_MAP: nodewright never edits
// aws-auth).
func (e *env) checkCluster(ctx context.Context) {
	out, err := e.c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: sdkaws.String(e.o.Cluster)})
	if err != nil {
		e.fail("cluster", fmt.Sprintf("check --cluster and --region (aws eks list-clusters --region %s) and that your credentials may eks:DescribeCluster", e.o.Region),
			"describe cluster %s in %s: %v", e.o.Cluster, e.o.Region, err)
		return
	}
	c := out.Cluster
	e.cluster = c
	if p, a, ok := arnParts(str(c.Arn)); ok {
		e.partition, e.account = p, a
	}
	version := str(c.Version)
	switch {
	case c.Status != ekstypes.ClusterStatusActive:
		e.fail("cluster", "wait until the cluster is ACTIVE (aws eks wait cluster-active --name "+e.o.Cluster+")", "cluster %s is %s", e.o.Cluster, c.Status)
	case str(c.Endpoint) == "":
		e.fail("cluster", "wait until the cluster is ACTIVE", "cluster %s reports no API server endpoint", e.o.Cluster)
	case minorOf(version) < minKubernetes:
		e.fail("cluster", "upgrade the cluster to Kubernetes 1.30 or newer: the webhook uses matchConditions",
			"cluster %s runs Kubernetes %s", e.o.Cluster, version)
	default:
		e.pass("cluster", "%s is ACTIVE, Kubernetes %s, endpoint %s", e.o.Cluster, version, str(c.Endpoint))
	}
	mode := ""
	if c.AccessConfig != nil {
		mode = string(c.AccessConfig.AuthenticationMode)
	}
	switch mode {
	case string(ekstypes.AuthenticationModeApi), string(ekstypes.AuthenticationModeApiAndConfigMap):
		e.pass("authentication-mode", "%s: the stack's access entries grant its access", mode)
	default:
		e.fail("authentication-mode",
			fmt.Sprintf("aws eks update-cluster-config --name %s --access-config authenticationMode=API_AND_CONFIG_MAP (keeps aws-auth working; the change is one-way)", e.o.Cluster),
			"authentication mode is %q: nodewright grants access with EKS access entries, which need API or API_AND_CONFIG_MAP", mode)
	}
}

// minorOf reads the minor version of "1.31" (0 when unreadable).
func minorOf(v string) int {
	_, minor, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(minor)
	return n
}

// checkStack reads the stack's outputs: deployed or not yet.
func (e *env) checkStack(ctx context.Context) {
	out, err := e.c.Stacks(ctx, e.o.StackName)
	switch {
	case errors.Is(err, ErrNoStack):
		e.warn("stack", e.deployCommand(), "%s is not deployed yet: the checks of its access entries and roles wait for it", e.o.StackName)
		return
	case err != nil:
		e.fail("stack", "your credentials need cloudformation:DescribeStacks on "+e.o.StackName, "describe stack %s: %v", e.o.StackName, err)
		return
	}
	if out[outControllerRo] == "" || out[outTable] == "" {
		e.fail("stack", "deploy the stack again with this version: "+e.deployCommand(),
			"%s has no %s or %s output: it was deployed by an older nodewright", e.o.StackName, outControllerRo, outTable)
		return
	}
	e.outputs = out
	e.report.Deployed, e.report.Outputs = true, out
	if e.account == "" {
		e.partition, e.account, _ = arnParts(out[outControllerRo])
	}
	e.pass("stack", "%s is deployed: table %s, controller role %s", e.o.StackName, out[outTable], out[outControllerRo])
}

// checkAccessEntries: the controller and registrar roles and every node
// role have an access entry of the right type.
func (e *env) checkAccessEntries(ctx context.Context) {
	if !e.deployed() {
		e.warn("access-entries", e.deployCommand(), "checked once the stack is deployed (it creates them)")
		return
	}
	have, err := e.listAccessEntries(ctx)
	if err != nil {
		e.fail("access-entries", "your credentials need eks:ListAccessEntries on the cluster", "list access entries of %s: %v", e.o.Cluster, err)
		return
	}
	want := map[string]string{e.outputs[outControllerRo]: "STANDARD"}
	if r := e.outputs[outRegistrarRo]; r != "" {
		want[r] = "STANDARD"
	}
	maps.Copy(want, e.nodeRoles())
	var missing, wrong []string
	var fixes []string
	for _, arn := range slices.Sorted(maps.Keys(want)) {
		kind := want[arn]
		if !have[arn] {
			missing = append(missing, arn)
			fixes = append(fixes, e.accessEntryFix(arn, kind))
			continue
		}
		if kind == "STANDARD" {
			continue
		}
		if got, err := e.accessEntryType(ctx, arn); err == nil && got != kind {
			wrong = append(wrong, fmt.Sprintf("%s is %s, want %s", arn, got, kind))
		}
	}
	switch {
	case len(missing) > 0:
		e.fail("access-entries", strings.Join(fixes, "; "), "no access entry for %s", strings.Join(missing, ", "))
	case len(wrong) > 0:
		e.fail("access-entries", "delete the entry and create it with the type shown (aws eks delete-access-entry / create-access-entry)", "%s", strings.Join(wrong, "; "))
	default:
		e.pass("access-entries", "%d principals have their entries: the controller and registrar roles (STANDARD) and %d node role(s)", len(want), len(want)-2)
	}
}

func (e *env) accessEntryFix(arn, kind string) string {
	if kind == "STANDARD" {
		return "deploy the stack again (it creates the entry of " + arn + "): " + e.deployCommand()
	}
	return fmt.Sprintf("aws eks create-access-entry --cluster-name %s --principal-arn %s --type %s (or deploy without it in -c existingAccessEntries)", e.o.Cluster, arn, kind)
}

func (e *env) listAccessEntries(ctx context.Context) (map[string]bool, error) {
	have := map[string]bool{}
	var token *string
	for {
		out, err := e.c.EKS.ListAccessEntries(ctx, &eks.ListAccessEntriesInput{ClusterName: sdkaws.String(e.o.Cluster), NextToken: token})
		if err != nil {
			return nil, err
		}
		for _, a := range out.AccessEntries {
			have[a] = true
		}
		if token = out.NextToken; token == nil {
			return have, nil
		}
	}
}

func (e *env) accessEntryType(ctx context.Context, arn string) (string, error) {
	out, err := e.c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: sdkaws.String(e.o.Cluster), PrincipalArn: sdkaws.String(arn)})
	if err != nil {
		return "", err
	}
	return str(out.AccessEntry.Type), nil
}
