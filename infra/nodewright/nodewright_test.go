package nodewright_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/aws-cdk-go/awscdk/v2/awss3"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/infra"
	"github.com/nodewright/nodewright/infra/nodewright"
)

// One jsii runtime process per test binary, closed here.
func TestMain(m *testing.M) {
	code := m.Run()
	jsii.Close()
	os.Exit(code)
}

// prodConfig is a user's configuration for cluster prod, already loaded:
// the repository's example with the default node role of prod.
func prodConfig(t *testing.T) fstest.MapFS {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "config", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return fstest.MapFS{"nodepools.yaml": {Data: bytes.ReplaceAll(b, []byte("nodewright-node-example"), []byte("nodewright-node-prod"))}}
}

// newApp is an app with the repository's cdk.json context (its feature
// flags and defaults) plus extra, writing its assembly in a temporary
// directory.
func newApp(t *testing.T, extra map[string]interface{}) awscdk.App {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "cdk.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Context map[string]interface{} `json:"context"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for k, v := range extra {
		doc.Context[k] = v
	}
	return awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &doc.Context})
}

// fakeDist is a build output directory: <function>/bootstrap for each.
func fakeDist(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, fn := range infra.Functions {
		if err := os.MkdirAll(filepath.Join(dir, fn), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fn, "bootstrap"), []byte("#!/bin/sh\n# "+fn+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// template synthesizes st; a failed synth panics inside jsii, which would
// take the whole binary down.
func template(t *testing.T, st awscdk.Stack) (tpl map[string]interface{}) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("synth: %v", r)
		}
	}()
	b, err := json.Marshal(assertions.Template_FromStack(st, nil).ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	return tpl
}

type resource struct {
	ID    string
	Props map[string]interface{}
}

func resources(tpl map[string]interface{}, typ string) []resource {
	var out []resource
	for id, r := range tpl["Resources"].(map[string]interface{}) {
		rm := r.(map[string]interface{})
		if typ == "" || rm["Type"] == typ {
			props, _ := rm["Properties"].(map[string]interface{})
			out = append(out, resource{ID: id, Props: props})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func js(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func list(v interface{}) []interface{} {
	if l, ok := v.([]interface{}); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []interface{}{v}
}

// A platform team's stack: its own bucket, nodewright for cluster prod
// (imported by its attributes) with its configuration embedded, a larger
// provisioner and a longer pending-pod alarm.
func TestNewInAUsersStack(t *testing.T) {
	app := newApp(t, nil)
	stack := awscdk.NewStack(app, jsii.String("platform-prod"), &awscdk.StackProps{
		Env: &awscdk.Environment{Account: jsii.String("111122223333"), Region: jsii.String("eu-west-1")},
	})
	awss3.NewBucket(stack, jsii.String("Artifacts"), &awss3.BucketProps{EnforceSSL: jsii.Bool(true)})
	cluster := awseks.Cluster_FromClusterAttributes(stack, jsii.String("Cluster"), &awseks.ClusterAttributes{ClusterName: jsii.String("prod")})
	nw, err := nodewright.New(stack, "Autoscaler", &nodewright.Props{
		Cluster:                      cluster,
		Config:                       prodConfig(t),
		AssetDir:                     fakeDist(t),
		FunctionSizes:                map[string]string{"provisioner": "3008:600"},
		OldestPendingPodAlarmSeconds: 600,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := *nw.Node().Path(); got != "platform-prod/Autoscaler" || len(nw.Functions) != len(infra.Functions) || nw.Table == nil {
		t.Fatalf("construct at %s with %d functions", got, len(nw.Functions))
	}
	tpl := template(t, stack)
	for typ, want := range map[string]int{
		"AWS::Lambda::Function": len(infra.Functions), "AWS::SQS::Queue": 8, "AWS::DynamoDB::Table": 1,
		"AWS::S3::Bucket": 1, "Custom::NodewrightAccess": 1, "Custom::NodewrightWebhook": 1,
	} {
		if got := len(resources(tpl, typ)); got != want {
			t.Errorf("%d %s, want %d", got, typ, want)
		}
	}
	// Everything but the user's own resources is under the construct.
	for _, r := range resources(tpl, "") {
		if !strings.HasPrefix(r.ID, "Autoscaler") && !strings.HasPrefix(r.ID, "Artifacts") {
			t.Errorf("resource %s is neither the user's nor under the construct", r.ID)
		}
	}
	checkSizes(t, tpl, map[string][2]float64{"provisioner": {3008, 600}})
	checkLeastPrivilege(t, tpl, "prod")
	for _, a := range resources(tpl, "AWS::CloudWatch::Alarm") {
		if strings.HasPrefix(a.ID, "AutoscalerOldestPendingPod") && a.Props["Threshold"] != float64(600) {
			t.Errorf("oldest pending pod alarm threshold %v, want 600", a.Props["Threshold"])
		}
	}
	if name := js(resources(tpl, "Custom::NodewrightAccess")[0].Props["Name"]); name != `"nodewright-controller-platform-prod"` {
		t.Errorf("controllers' RBAC named %s, want after the user's stack", name)
	}
	for _, r := range resources(tpl, "") {
		tagged := strings.Contains(js(r.Props["Tags"]), `"Key":"nodewright.io/cluster","Value":"prod"`)
		if r.ID == resources(tpl, "AWS::S3::Bucket")[0].ID && tagged {
			t.Errorf("the user's bucket carries nodewright's cluster tag")
		}
		if r.ID == resources(tpl, "AWS::DynamoDB::Table")[0].ID && !tagged {
			t.Errorf("the table lacks the cluster tag: %s", js(r.Props["Tags"]))
		}
	}
}

// checkSizes checks each function's memory and timeout: want's when given,
// else infra.Sizing's.
func checkSizes(t *testing.T, tpl map[string]interface{}, want map[string][2]float64) {
	t.Helper()
	for _, fn := range infra.Functions {
		w, ok := want[fn]
		if !ok {
			w = [2]float64{float64(infra.Sizing[fn].MemoryMB), float64(infra.Sizing[fn].TimeoutSeconds)}
		}
		found := false
		for _, r := range resources(tpl, "AWS::Lambda::Function") {
			if !strings.Contains(js(r.Props["Description"]), "nodewright "+fn+" for") {
				continue
			}
			found = true
			if r.Props["MemorySize"] != w[0] || r.Props["Timeout"] != w[1] {
				t.Errorf("%s: %v MB, %v s, want %v", fn, r.Props["MemorySize"], r.Props["Timeout"], w)
			}
		}
		if !found {
			t.Errorf("no function %s", fn)
		}
	}
}

// checkLeastPrivilege checks the policies nodewright adds to a user's
// stack: no service-wide action, PassRole on the node role to EC2 only,
// data actions on its own table and queues, EC2 mutations tied to the
// cluster's tags, nothing on the user's resources.
func checkLeastPrivilege(t *testing.T, tpl map[string]interface{}, cluster string) {
	t.Helper()
	table := resources(tpl, "AWS::DynamoDB::Table")[0].ID
	bucket := resources(tpl, "AWS::S3::Bucket")[0].ID
	statements := 0
	for _, p := range resources(tpl, "AWS::IAM::Policy") {
		if !strings.HasPrefix(p.ID, "Autoscaler") {
			continue
		}
		for _, s := range list(p.Props["PolicyDocument"].(map[string]interface{})["Statement"]) {
			statements++
			checkStatement(t, p.ID, s.(map[string]interface{}), table, bucket, cluster)
		}
	}
	if statements < 10 {
		t.Errorf("%d statements in nodewright's policies: are its grants there?", statements)
	}
}

func checkStatement(t *testing.T, policy string, s map[string]interface{}, table, bucket, cluster string) {
	t.Helper()
	res, cond := js(s["Resource"]), js(s["Condition"])
	if strings.Contains(res, bucket) {
		t.Errorf("%s reaches the user's bucket: %s", policy, js(s))
	}
	for _, a := range list(s["Action"]) {
		a := fmt.Sprint(a)
		switch {
		case a == "*" || strings.HasSuffix(a, ":*"):
			t.Errorf("%s: service-wide action %s", policy, a)
		case a == "iam:PassRole":
			if strings.Contains(res, "*") || !strings.Contains(res, "NodeRole") || !strings.Contains(cond, `"iam:PassedToService":"ec2.amazonaws.com"`) {
				t.Errorf("%s: PassRole on %s (%s)", policy, res, cond)
			}
		case strings.HasPrefix(a, "dynamodb:") && !strings.Contains(res, table):
			t.Errorf("%s: %s on %s, not nodewright's table", policy, a, res)
		case strings.HasPrefix(a, "sqs:") && !strings.Contains(res, "Autoscaler"):
			t.Errorf("%s: %s on %s, not nodewright's queues", policy, a, res)
		case a == "ec2:TerminateInstances" && !strings.Contains(cond, `"aws:ResourceTag/kubernetes.io/cluster/`+cluster+`":"owned"`):
			t.Errorf("%s: TerminateInstances without the cluster's owned tag: %s", policy, cond)
		case a == "eks:DescribeCluster" && !strings.Contains(res, ":cluster/"+cluster):
			t.Errorf("%s: DescribeCluster on %s", policy, res)
		}
	}
}

// Under the ID "Default" the construct's resources are those of the
// repository's stack, logical IDs included: a stack deployed by the
// repository's app can move into a user's app without CloudFormation
// replacing anything.
func TestDefaultIDKeepsTheRepositoryStacksLogicalIDs(t *testing.T) {
	cfg := infra.Defaults()
	cfg.ClusterName, cfg.ConfigDir, cfg.AssetDir = "example", filepath.Join("..", "testdata", "config"), fakeDist(t)
	cfg.AlarmEmail = "oncall@example.com"
	repo, err := infra.NewStack(newApp(t, nil), infra.StackName("example"), infra.StackInput{Config: cfg, Loader: infra.LoadWithAPIs, StagingDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	users := awscdk.NewStack(newApp(t, nil), jsii.String(infra.StackName("example")), nil)
	if _, err := nodewright.New(users, "Default", &nodewright.Props{Settings: &cfg}); err != nil {
		t.Fatal(err)
	}
	want, got := template(t, repo.Stack), template(t, users)
	for _, section := range []string{"Resources", "Outputs"} {
		if !reflect.DeepEqual(got[section], want[section]) {
			t.Errorf("%s differ:\nrepository's stack: %s\nconstruct:          %s", section, js(want[section]), js(got[section]))
		}
	}
	if n := len(resources(got, "")); n < 50 {
		t.Errorf("only %d resources compared", n)
	}
}

// Without props the context decides, as for the repository's app: the
// cluster, the configuration and functionSizes; props' sizes come on top.
func TestNewReadsTheAppsContext(t *testing.T) {
	app := newApp(t, map[string]interface{}{
		infra.CtxClusterName: "staging", infra.CtxConfigDir: filepath.Join("..", "testdata", "config"),
		infra.CtxFunctionSizes: "disruption=3008:300,lifecycle=2048:120",
	})
	stack := awscdk.NewStack(app, jsii.String("platform-staging"), nil)
	nw, err := nodewright.New(stack, "Nodewright", &nodewright.Props{AssetDir: fakeDist(t), FunctionSizes: map[string]string{"lifecycle": "1536:100"}})
	if err != nil {
		t.Fatal(err)
	}
	if nw.Config.ClusterName != "staging" {
		t.Errorf("cluster %q, want the context's", nw.Config.ClusterName)
	}
	checkSizes(t, template(t, stack), map[string][2]float64{"disruption": {3008, 300}, "lifecycle": {1536, 100}})
}

// A bad input is an error naming the problem, and leaves nothing behind.
func TestNewRejectsBadInput(t *testing.T) {
	app := newApp(t, nil)
	stack := awscdk.NewStack(app, jsii.String("platform"), nil)
	token := awseks.Cluster_FromClusterAttributes(stack, jsii.String("Imported"), &awseks.ClusterAttributes{
		ClusterName: awscdk.Fn_ImportValue(jsii.String("cluster-name")),
	})
	prod := prodConfig(t)
	bad := fstest.MapFS{"pool.yaml": {Data: []byte("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: x\nspec:\n  nope: 1\n")}}
	for name, c := range map[string]struct {
		props nodewright.Props
		want  string
	}{
		"no cluster":         {nodewright.Props{Config: prod}, "clusterName is required"},
		"cluster name token": {nodewright.Props{Cluster: token, Config: prod}, "not known at synth"},
		"both configs":       {nodewright.Props{ClusterName: "prod", Config: prod, ConfigDir: "x"}, "not both"},
		"bad yaml":           {nodewright.Props{ClusterName: "prod", Config: bad}, "pool.yaml:6"},
		"bad size":           {nodewright.Props{ClusterName: "prod", Config: prod, FunctionSizes: map[string]string{"provisioner": "99999:1"}}, "memory 99999 MB"},
		"no build output":    {nodewright.Props{ClusterName: "prod", Config: prod, AssetDir: t.TempDir()}, "run `make build` first"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := nodewright.New(stack, "Nodewright", &c.props)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			if stack.Node().TryFindChild(jsii.String("Nodewright")) != nil {
				t.Errorf("a failed New left its construct in the stack")
			}
		})
	}
}
