package infra

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/settings"
)

// All CDK tests live in this package: one jsii runtime process per test
// binary, closed here.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nodewright-infra-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testRoot = dir
	code := m.Run()
	jsii.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testRoot outlives every test: the shared stack's outdir and staging dir
// are read again by later tests (cdk-nag writes its report there).
var testRoot string

// check runs an assertions call; a failed assertion panics inside jsii, which
// would take the whole binary down.
func check(t *testing.T, what string, f func()) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: %v", what, r)
		}
	}()
	f()
}

const testCluster = "example"

type fakeLoader struct {
	files []string
	cfg   *NodeConfig
	err   error
}

func (f *fakeLoader) load(files ...string) (*NodeConfig, error) {
	f.files = files
	return f.cfg, f.err
}

func goodNodeConfig() *NodeConfig {
	return &NodeConfig{
		NodePools:   []string{"default"},
		NodeClasses: []NodeClassInfo{{Name: "default", Role: DefaultNodeRoleName(testCluster), Source: "testdata/config/default.yaml:38"}},
	}
}

func baseConfig(t testing.TB) Config {
	c := Defaults()
	c.ClusterName = testCluster
	c.ConfigDir = filepath.Join("testdata", "config")
	c.AssetDir = filepath.Join(t.TempDir(), "no-dist")
	c.PlaceholderAssets = true
	return c
}

func newTestStack(t testing.TB, cfg Config, loader ConfigLoader, dir string) (*Stack, error) {
	for _, d := range []string{"out", "staging"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, err
		}
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(filepath.Join(dir, "out")), Context: cdkJSONContext(t)})
	st, err := NewStack(app, StackName(cfg.ClusterName), StackInput{Config: cfg, Loader: loader, StagingDir: filepath.Join(dir, "staging")})
	if err == nil {
		ApplyNag(app)
	}
	return st, err
}

// cdkJSONContext is the context of the repository's cdk.json (feature flags
// and defaults), so the tests synthesize what `cdk synth` does.
func cdkJSONContext(t testing.TB) *map[string]interface{} {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "cdk.json"))
	if err != nil {
		t.Fatalf("read cdk.json: %v", err)
	}
	var doc struct {
		Context map[string]interface{} `json:"context"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("cdk.json: %v", err)
	}
	return &doc.Context
}

// The full stack (private endpoint, e-mail alarms, webhook on) is built and
// synthesized once; the tests below read its template.
var (
	fullOnce     sync.Once
	fullStack    *Stack
	fullTemplate assertions.Template
	fullJSON     map[string]interface{}
	fullErr      error
)

func full(t *testing.T) (*Stack, assertions.Template, map[string]interface{}) {
	t.Helper()
	fullOnce.Do(func() {
		cfg := baseConfig(t)
		cfg.AssetDir = filepath.Join(testRoot, "no-dist")
		cfg.Account, cfg.Region = "111122223333", "eu-west-1"
		cfg.VpcID = "vpc-0123456789abcdef0"
		cfg.SubnetIDs = []string{"subnet-0123456789abcdef0", "subnet-0123456789abcdef1"}
		cfg.ClusterSecurityGroupID = "sg-0123456789abcdef0"
		cfg.AlarmEmail = "oncall@example.com"
		fl := &fakeLoader{cfg: goodNodeConfig()}
		fullStack, fullErr = newTestStack(t, cfg, fl.load, filepath.Join(testRoot, "full"))
		if fullErr != nil {
			return
		}
		defer func() {
			if r := recover(); r != nil {
				fullErr = fmt.Errorf("synth: %v", r)
			}
		}()
		fullTemplate = assertions.Template_FromStack(fullStack.Stack, nil)
		b, err := json.Marshal(fullTemplate.ToJSON())
		if err != nil {
			fullErr = err
			return
		}
		fullErr = json.Unmarshal(b, &fullJSON)
	})
	if fullErr != nil {
		t.Fatalf("build full stack: %v", fullErr)
	}
	return fullStack, fullTemplate, fullJSON
}

// --- template helpers (plain Go over the template JSON) ---

// synthTemplate synthesizes a stack for cfg and returns its template.
func synthTemplate(t *testing.T, cfg Config) (*Stack, map[string]interface{}) {
	t.Helper()
	s, err := newTestStack(t, cfg, (&fakeLoader{cfg: goodNodeConfig()}).load, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var j map[string]interface{}
	check(t, "synth", func() {
		b, _ := json.Marshal(assertions.Template_FromStack(s.Stack, nil).ToJSON())
		_ = json.Unmarshal(b, &j)
	})
	if j == nil {
		t.Fatal("no template")
	}
	return s, j
}

type resource struct {
	ID    string
	Type  string
	Props map[string]interface{}
	Raw   map[string]interface{}
}

func resources(tpl map[string]interface{}, typ string) []resource {
	var out []resource
	for id, r := range tpl["Resources"].(map[string]interface{}) {
		rm := r.(map[string]interface{})
		if rm["Type"] != typ {
			continue
		}
		props, _ := rm["Properties"].(map[string]interface{})
		out = append(out, resource{ID: id, Type: typ, Props: props, Raw: rm})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func logicalID(t *testing.T, tpl map[string]interface{}, typ, prefix string) string {
	t.Helper()
	var ids []string
	for _, r := range resources(tpl, typ) {
		if strings.HasPrefix(r.ID, prefix) {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("want one %s with logical ID prefix %s, found %v", typ, prefix, ids)
	}
	return ids[0]
}

func js(v interface{}) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func asList(v interface{}) []interface{} {
	switch x := v.(type) {
	case []interface{}:
		return x
	case nil:
		return nil
	default:
		return []interface{}{x}
	}
}

type statement struct {
	Policy    string
	Effect    string
	Actions   []string
	Resources []interface{}
	Condition map[string]interface{}
	Principal interface{}
}

// statements returns every IAM statement of the template: identity policies,
// inline role policies, managed policies and resource policies.
func statements(tpl map[string]interface{}) []statement {
	var out []statement
	addDoc := func(owner string, doc interface{}) {
		d, _ := doc.(map[string]interface{})
		for _, s := range asList(d["Statement"]) {
			sm := s.(map[string]interface{})
			st := statement{Policy: owner, Effect: fmt.Sprint(sm["Effect"]), Resources: asList(sm["Resource"]), Principal: sm["Principal"]}
			for _, a := range asList(sm["Action"]) {
				st.Actions = append(st.Actions, fmt.Sprint(a))
			}
			st.Condition, _ = sm["Condition"].(map[string]interface{})
			out = append(out, st)
		}
	}
	for _, r := range resources(tpl, "AWS::IAM::Policy") {
		addDoc(r.ID, r.Props["PolicyDocument"])
	}
	for _, r := range resources(tpl, "AWS::IAM::ManagedPolicy") {
		addDoc(r.ID, r.Props["PolicyDocument"])
	}
	for _, r := range resources(tpl, "AWS::IAM::Role") {
		for _, p := range asList(r.Props["Policies"]) {
			addDoc(r.ID, p.(map[string]interface{})["PolicyDocument"])
		}
	}
	for _, r := range resources(tpl, "AWS::SQS::QueuePolicy") {
		addDoc(r.ID, r.Props["PolicyDocument"])
	}
	return out
}

func (s statement) has(action string) bool {
	for _, a := range s.Actions {
		if a == action {
			return true
		}
		if strings.HasSuffix(a, "*") && strings.HasPrefix(action, strings.TrimSuffix(a, "*")) {
			return true
		}
	}
	return false
}

func (s statement) cond(op, key string) interface{} {
	m, _ := s.Condition[op].(map[string]interface{})
	return m[key]
}

// --- configuration ---

func TestFromContext(t *testing.T) {
	ctx := map[string]interface{}{
		CtxClusterName:       "prod",
		CtxConfigDir:         "cfg",
		CtxSubnetIDs:         "subnet-0123456789abcdef0, subnet-0123456789abcdef1",
		CtxSecurityGroupIDs:  []interface{}{"sg-0123456789abcdef0"},
		CtxVpcID:             "vpc-0123456789abcdef0",
		CtxWebhook:           "false",
		CtxLogRetentionDays:  float64(90),
		CtxProvisionerRate:   "2",
		CtxRebalance:         "replace",
		CtxPlaceholderAssets: true,
	}
	c, err := FromContext(func(k string) interface{} { return ctx[k] })
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if c.ClusterName != "prod" || len(c.SubnetIDs) != 2 || c.SubnetIDs[1] != "subnet-0123456789abcdef1" || len(c.SecurityGroupIDs) != 1 ||
		c.Webhook || c.LogRetentionDays != 90 || c.ProvisionerRateMinutes != 2 || c.LifecycleRateMinutes != 1 ||
		c.Rebalance != RebalanceReplace || !c.PlaceholderAssets || c.NodeRoleName != "nodewright-node-prod" || c.EKSAccess != AccessRBAC {
		t.Errorf("config = %+v", c)
	}

	_, err = FromContext(func(k string) interface{} {
		return map[string]interface{}{CtxWebhook: "maybe", CtxLogRetentionDays: "thirty"}[k]
	})
	if err == nil || !strings.Contains(err.Error(), CtxWebhook) || !strings.Contains(err.Error(), CtxLogRetentionDays) {
		t.Errorf("bad context types: err = %v", err)
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Defaults()
	c.Rebalance = "sometimes"
	c.LogRetentionDays = 31
	c.SubnetIDs = []string{"subnet-0123456789abcdef0"}
	c.AlarmEmail = "not-an-address"
	c.ProvisionerRateMinutes = 0
	c.EKSAccess = "admin"
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted a bad configuration")
	}
	for _, want := range []string{CtxClusterName + " is required", CtxConfigDir + " is required", CtxRebalance, CtxLogRetentionDays,
		CtxVpcID, CtxAlarmEmail, CtxProvisionerRate, CtxEKSAccess} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
	long := Defaults()
	long.ClusterName, long.ConfigDir = strings.Repeat("a", 60), "x"
	if err := long.Validate(); err == nil || !strings.Contains(err.Error(), CtxNodeRoleName) {
		t.Errorf("a default node role name over 64 characters must ask for %s: %v", CtxNodeRoleName, err)
	}
}

func TestConfigFiles(t *testing.T) {
	files, err := ConfigFiles(filepath.Join("testdata", "config"))
	if err != nil || len(files) != 1 || filepath.Base(files[0]) != "default.yaml" {
		t.Fatalf("ConfigFiles = %v, %v", files, err)
	}
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "README.md"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ConfigFiles(empty); err == nil || !strings.Contains(err.Error(), "no .yaml") {
		t.Errorf("directory without YAML: %v", err)
	}
	if _, err := ConfigFiles(filepath.Join(empty, "missing")); err == nil {
		t.Error("missing directory accepted")
	}
}

// Errors are found before any construct exists (no jsii calls), so these
// cases are cheap.
func TestNewStackRejectsBadInput(t *testing.T) {
	t.Run("loader error names file line and field", func(t *testing.T) {
		msg := "testdata/config/default.yaml:11: spec.template.spec.requirements[0].operator: unsupported operator \"Inn\""
		fl := &fakeLoader{err: errors.New(msg)}
		_, err := NewStack(nil, "x", StackInput{Config: baseConfig(t), Loader: fl.load, StagingDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), msg) {
			t.Fatalf("err = %v, want it to carry %q", err, msg)
		}
		if len(fl.files) != 1 || !strings.HasSuffix(fl.files[0], "default.yaml") {
			t.Errorf("loader got files %v", fl.files)
		}
	})
	t.Run("node class role is not the stack's node role", func(t *testing.T) {
		nc := goodNodeConfig()
		nc.NodeClasses[0].Role = "KarpenterNodeRole-example"
		_, err := NewStack(nil, "x", StackInput{Config: baseConfig(t), Loader: (&fakeLoader{cfg: nc}).load, StagingDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "testdata/config/default.yaml:38: spec.role") || !strings.Contains(err.Error(), CtxNodeRoleName) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("instance profile other than the stack's", func(t *testing.T) {
		nc := goodNodeConfig()
		nc.NodeClasses[0].Role, nc.NodeClasses[0].InstanceProfile = "", "KarpenterNodeInstanceProfile-example"
		_, err := NewStack(nil, "x", StackInput{Config: baseConfig(t), Loader: (&fakeLoader{cfg: nc}).load, StagingDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "spec.instanceProfile") || !strings.Contains(err.Error(), "nodewright-example-nodewright-node-example") {
			t.Fatalf("err = %v", err)
		}
		nc.NodeClasses[0].InstanceProfile = "nodewright-example-nodewright-node-example"
		if err := checkNodeConfig(func() Config { c := baseConfig(t); _ = c.Validate(); return c }(), nc); err != nil {
			t.Fatalf("the stack's own instance profile rejected: %v", err)
		}
	})
	t.Run("no node pool", func(t *testing.T) {
		nc := goodNodeConfig()
		nc.NodePools = nil
		_, err := NewStack(nil, "x", StackInput{Config: baseConfig(t), Loader: (&fakeLoader{cfg: nc}).load, StagingDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "no NodePool") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("missing build output without placeholder", func(t *testing.T) {
		cfg := baseConfig(t)
		cfg.PlaceholderAssets = false
		_, err := NewStack(nil, "x", StackInput{Config: cfg, Loader: (&fakeLoader{cfg: goodNodeConfig()}).load, StagingDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "make build") || !strings.Contains(err.Error(), CtxPlaceholderAssets) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestFunctionCodeUsesBuildOutput(t *testing.T) {
	cfg := baseConfig(t)
	cfg.PlaceholderAssets = false
	cfg.AssetDir = t.TempDir()
	if err := os.MkdirAll(filepath.Join(cfg.AssetDir, "lifecycle"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfg.AssetDir, "lifecycle", "bootstrap"), []byte("ELF"), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := functionCode(cfg, t.TempDir(), "lifecycle")
	if err != nil || dir != filepath.Join(cfg.AssetDir, "lifecycle") {
		t.Fatalf("functionCode = %q, %v", dir, err)
	}
	cfg.PlaceholderAssets = true
	staging := t.TempDir()
	dir, err = functionCode(cfg, staging, "provisioner")
	if err != nil || !strings.HasPrefix(dir, staging) {
		t.Fatalf("placeholder = %q, %v", dir, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "bootstrap"))
	if !strings.Contains(string(b), "make build") {
		t.Errorf("placeholder bootstrap does not explain itself: %q", b)
	}
}

// --- the synthesized template ---

func TestTable(t *testing.T) {
	_, tpl, _ := full(t)
	check(t, "table", func() {
		tpl.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]interface{}{
			"DeletionPolicy":      "Retain",
			"UpdateReplacePolicy": "Retain",
			"Properties": map[string]interface{}{
				"BillingMode": "PAY_PER_REQUEST",
				"KeySchema": []interface{}{
					map[string]interface{}{"AttributeName": "pk", "KeyType": "HASH"},
					map[string]interface{}{"AttributeName": "sk", "KeyType": "RANGE"},
				},
				"PointInTimeRecoverySpecification": map[string]interface{}{"PointInTimeRecoveryEnabled": true},
				"TimeToLiveSpecification":          map[string]interface{}{"AttributeName": "expiresAt", "Enabled": true},
				"SSESpecification":                 map[string]interface{}{"SSEEnabled": true},
				"DeletionProtectionEnabled":        true,
				"GlobalSecondaryIndexes": assertions.Match_ArrayWith(&[]interface{}{
					map[string]interface{}{
						"IndexName":  "by-instance",
						"KeySchema":  []interface{}{map[string]interface{}{"AttributeName": "gsi1pk", "KeyType": "HASH"}, map[string]interface{}{"AttributeName": "gsi1sk", "KeyType": "RANGE"}},
						"Projection": map[string]interface{}{"ProjectionType": "ALL"},
					},
					map[string]interface{}{
						"IndexName":  "by-nodepool",
						"KeySchema":  []interface{}{map[string]interface{}{"AttributeName": "gsi2pk", "KeyType": "HASH"}, map[string]interface{}{"AttributeName": "gsi2sk", "KeyType": "RANGE"}},
						"Projection": map[string]interface{}{"ProjectionType": "ALL"},
					},
				}),
			},
		})
	})
}

func TestQueuesAndRules(t *testing.T) {
	_, tpl, j := full(t)
	check(t, "six sqs queues", func() { tpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(6)) })
	check(t, "interruption queue", func() {
		tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]interface{}{
			"MessageRetentionPeriod": 300,
			"SqsManagedSseEnabled":   true,
			"VisibilityTimeout":      60,
			"RedrivePolicy":          map[string]interface{}{"maxReceiveCount": 3, "deadLetterTargetArn": assertions.Match_AnyValue()},
		})
	})
	for _, q := range resources(j, "AWS::SQS::Queue") {
		if q.Props["SqsManagedSseEnabled"] != true {
			t.Errorf("queue %s is not encrypted", q.ID)
		}
	}
	for _, detail := range []string{"EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation", "EC2 Instance State-change Notification", "AWS Health Event"} {
		check(t, "rule "+detail, func() {
			tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]interface{}{
				"EventPattern": assertions.Match_ObjectLike(&map[string]interface{}{"detail-type": []interface{}{detail}}),
				"State":        "ENABLED",
				"Targets":      []interface{}{assertions.Match_ObjectLike(&map[string]interface{}{"Arn": map[string]interface{}{"Fn::GetAtt": []interface{}{logicalID(t, j, "AWS::SQS::Queue", "InterruptionQueue"), "Arn"}}})},
			})
		})
	}

	// The queue policy lets in only the four rules.
	iq := logicalID(t, j, "AWS::SQS::Queue", "InterruptionQueue")
	var ruleArns []string
	for _, r := range resources(j, "AWS::Events::Rule") {
		if r.Props["EventPattern"] != nil {
			ruleArns = append(ruleArns, js(map[string]interface{}{"Fn::GetAtt": []interface{}{r.ID, "Arn"}}))
		}
	}
	if len(ruleArns) != 4 {
		t.Fatalf("interruption rules = %d, want 4", len(ruleArns))
	}
	var allowed []string
	for _, p := range resources(j, "AWS::SQS::QueuePolicy") {
		if !strings.Contains(js(p.Props["Queues"]), iq) {
			continue
		}
		for _, s := range statements(map[string]interface{}{"Resources": map[string]interface{}{p.ID: p.Raw}}) {
			if s.Effect != "Allow" {
				continue
			}
			src := s.cond("ArnEquals", "aws:SourceArn")
			if src == nil {
				t.Errorf("queue policy statement without aws:SourceArn: %+v", s)
				continue
			}
			if js(s.Principal) != `{"Service":"events.amazonaws.com"}` {
				t.Errorf("queue policy principal %s, want events.amazonaws.com", js(s.Principal))
			}
			allowed = append(allowed, js(src))
		}
	}
	sort.Strings(allowed)
	sort.Strings(ruleArns)
	if strings.Join(allowed, ",") != strings.Join(ruleArns, ",") {
		t.Errorf("queue policy allows %v, want exactly the rules %v", allowed, ruleArns)
	}
}

func fnByName(t *testing.T, j map[string]interface{}, name string) resource {
	t.Helper()
	id := logicalID(t, j, "AWS::Lambda::Function", exportID(name)+"Function")
	for _, r := range resources(j, "AWS::Lambda::Function") {
		if r.ID == id {
			return r
		}
	}
	panic("unreachable")
}

func TestFunctions(t *testing.T) {
	_, tpl, j := full(t)
	check(t, "six functions", func() {
		tpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(float64(len(Functions))))
	})
	for _, name := range Functions {
		f := fnByName(t, j, name)
		p := f.Props
		if p["Runtime"] != "provided.al2023" || js(p["Architectures"]) != `["arm64"]` || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v arch %v handler %v", name, p["Runtime"], p["Architectures"], p["Handler"])
		}
		if lc, _ := p["LoggingConfig"].(map[string]interface{}); lc["LogFormat"] != "JSON" || lc["LogGroup"] == nil {
			t.Errorf("%s: logging config %v", name, js(p["LoggingConfig"]))
		}
		size := Sizing[name]
		if p["MemorySize"] != float64(size.MemoryMB) || p["Timeout"] != float64(size.TimeoutSeconds) {
			t.Errorf("%s: memory %v timeout %v", name, p["MemorySize"], p["Timeout"])
		}
		reserved, _ := p["ReservedConcurrentExecutions"].(float64)
		if int(reserved) != size.ReservedConcurrency || (name == "disruption") != (reserved == 1) {
			t.Errorf("%s: reserved concurrency %v", name, reserved)
		}
		inVPC := p["VpcConfig"] != nil
		if inVPC != size.InVPC {
			t.Errorf("%s: in VPC = %v, want %v", name, inVPC, size.InVPC)
		}
		env := js(p["Environment"])
		for _, k := range []string{settings.EnvClusterName, settings.EnvLogLevel} {
			if !strings.Contains(env, `"`+k+`"`) {
				t.Errorf("%s: env lacks %s", name, k)
			}
		}
		controller := name != "webhook" && name != "webhookregistrar"
		if controller {
			for _, k := range []string{settings.EnvTableName, settings.EnvConfigDir, settings.EnvInterruptionQueue, settings.EnvWorkQueueURL,
				settings.EnvProvisionQueueURL, settings.EnvRebalance, settings.EnvInstanceProfile, settings.EnvNodeRoleARN, settings.EnvNodeRoleName,
				settings.EnvOwner} {
				if !strings.Contains(env, `"`+k+`"`) {
					t.Errorf("%s: env lacks %s", name, k)
				}
			}
		}
		// Every name the stack sets is one the functions read.
		for k := range p["Environment"].(map[string]interface{})["Variables"].(map[string]interface{}) {
			if !strings.HasPrefix(k, "NODEWRIGHT_") {
				t.Errorf("%s: env %s is not a settings name", name, k)
			}
		}
		if got := len(asList(p["Layers"])); (got == 1) != controller {
			t.Errorf("%s: %d layers, want the config layer on controllers only", name, got)
		}
	}
	if env := js(fnByName(t, j, "webhook").Props["Environment"]); !strings.Contains(env, settings.EnvWebhookSecretARN) || !strings.Contains(env, settings.EnvProvisionQueueURL) ||
		!strings.Contains(env, `"`+settings.EnvWebhookPrefix+`":"/admit/"`) || strings.Contains(env, settings.EnvInterruptionQueue) || strings.Contains(env, `"`+settings.EnvWebhookSecret+`"`) {
		t.Errorf("webhook env = %s", env)
	}
	check(t, "log groups with retention", func() {
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), map[string]interface{}{"RetentionInDays": 30}, jsii.Number(float64(len(Functions))))
	})
	check(t, "sqs event sources", func() {
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]interface{}{
			"BatchSize": 10, "FunctionResponseTypes": []interface{}{"ReportBatchItemFailures"},
		}, jsii.Number(3))
	})
	for _, m := range resources(j, "AWS::Lambda::EventSourceMapping") {
		src, fn := js(m.Props["EventSourceArn"]), js(m.Props["FunctionName"])
		switch {
		case strings.Contains(src, "InterruptionQueue") && strings.Contains(fn, "InterruptionFunction"):
		case strings.Contains(src, "WorkQueue") && strings.Contains(fn, "LifecycleFunction"):
		case strings.Contains(src, "ProvisionQueue") && strings.Contains(fn, "ProvisionerFunction"):
		default:
			t.Errorf("unexpected event source mapping %s -> %s", src, fn)
		}
	}
	schedules := 0
	for _, r := range resources(j, "AWS::Events::Rule") {
		if r.Props["ScheduleExpression"] == nil {
			continue
		}
		schedules++
		if r.Props["ScheduleExpression"] != "rate(1 minute)" {
			t.Errorf("%s: schedule %v", r.ID, r.Props["ScheduleExpression"])
		}
	}
	if schedules != 3 {
		t.Errorf("schedules = %d, want 3 (provisioner, lifecycle, disruption)", schedules)
	}
	check(t, "layer", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::LayerVersion"), map[string]interface{}{
			"CompatibleArchitectures": []interface{}{"arm64"}, "CompatibleRuntimes": []interface{}{"provided.al2023"},
		})
	})
	check(t, "provisioner async config", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]interface{}{"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60})
	})
	check(t, "cluster ingress from functions", func() {
		tpl.HasResourceProperties(jsii.String("AWS::EC2::SecurityGroupIngress"), map[string]interface{}{
			"GroupId": "sg-0123456789abcdef0", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp",
		})
	})
}

func TestWebhook(t *testing.T) {
	_, tpl, j := full(t)
	check(t, "function url", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]interface{}{"AuthType": "NONE"})
	})
	check(t, "secret", func() {
		tpl.HasResourceProperties(jsii.String("AWS::SecretsManager::Secret"), map[string]interface{}{
			"GenerateSecretString": map[string]interface{}{"PasswordLength": 48, "ExcludePunctuation": true, "IncludeSpace": false},
		})
	})
	regID := logicalID(t, j, "AWS::Lambda::Function", "WebhookregistrarFunction")
	check(t, "registration custom resource", func() {
		tpl.HasResource(jsii.String("Custom::NodewrightWebhook"), map[string]interface{}{
			"Properties": map[string]interface{}{
				"ServiceToken":   map[string]interface{}{"Fn::GetAtt": []interface{}{regID, "Arn"}},
				"ClusterName":    testCluster,
				"WebhookName":    "nodewright-example",
				"PathPrefix":     WebhookPathPrefix,
				"CABundle":       assertions.Match_StringLikeRegexp(jsii.String("BEGIN CERTIFICATE")),
				"ServiceTimeout": "300",
			},
			"DependsOn": assertions.Match_ArrayWith(&[]interface{}{logicalID(t, j, "AWS::EKS::AccessEntry", "WebhookRegistrarAccessEntry")}),
		})
	})
	if strings.Count(amazonRootCAs, "BEGIN CERTIFICATE") != 4 {
		t.Errorf("embedded CA bundle has %d certificates, want Amazon Root CA 1-4", strings.Count(amazonRootCAs, "BEGIN CERTIFICATE"))
	}
}

func TestNodeRoleAndAccessEntries(t *testing.T) {
	_, tpl, j := full(t)
	nodeRole := logicalID(t, j, "AWS::IAM::Role", "NodeRole")
	var arns []string
	for _, r := range resources(j, "AWS::IAM::Role") {
		if r.ID == nodeRole {
			if r.Props["RoleName"] != DefaultNodeRoleName(testCluster) {
				t.Errorf("node role name %v", r.Props["RoleName"])
			}
			for _, a := range asList(r.Props["ManagedPolicyArns"]) {
				arns = append(arns, js(a))
			}
			if !strings.Contains(js(r.Props["AssumeRolePolicyDocument"]), "ec2.amazonaws.com") {
				t.Errorf("node role trust = %s", js(r.Props["AssumeRolePolicyDocument"]))
			}
		}
	}
	for _, p := range NodeManagedPolicies {
		if !strings.Contains(strings.Join(arns, " "), ":iam::aws:policy/"+p+`"`) {
			t.Errorf("node role lacks %s: %v", p, arns)
		}
	}
	check(t, "instance profile", func() {
		tpl.HasResourceProperties(jsii.String("AWS::IAM::InstanceProfile"), map[string]interface{}{
			"InstanceProfileName": "nodewright-example-nodewright-node-example",
			"Roles":               []interface{}{map[string]interface{}{"Ref": nodeRole}},
		})
	})
	check(t, "node access entry", func() {
		tpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), map[string]interface{}{
			"ClusterName": testCluster, "Type": "EC2_LINUX",
			"PrincipalArn": map[string]interface{}{"Fn::GetAtt": []interface{}{nodeRole, "Arn"}},
		})
	})
	ctrl := logicalID(t, j, "AWS::IAM::Role", "ControllerRole")
	check(t, "controller access entry: a group, no access policy", func() {
		tpl.HasResourceProperties(jsii.String("AWS::EKS::AccessEntry"), map[string]interface{}{
			"ClusterName": testCluster, "Type": "STANDARD",
			"PrincipalArn":     map[string]interface{}{"Fn::GetAtt": []interface{}{ctrl, "Arn"}},
			"KubernetesGroups": []interface{}{access.ControllerGroup},
			"AccessPolicies":   assertions.Match_Absent(),
		})
	})
	check(t, "three access entries", func() { tpl.ResourceCountIs(jsii.String("AWS::EKS::AccessEntry"), jsii.Number(3)) })
	checkAccess(t, j, false)
	// The webhook's role has no cluster access at all.
	wh := logicalID(t, j, "AWS::IAM::Role", "WebhookRole")
	for _, e := range resources(j, "AWS::EKS::AccessEntry") {
		if strings.Contains(js(e.Props["PrincipalArn"]), wh) {
			t.Errorf("the webhook role has an access entry (%s)", e.ID)
		}
	}
}

var sharedLaunchResource = regexp.MustCompile(`:(image|snapshot|security-group|subnet|capacity-reservation)/\*`)

func TestIAMLeastPrivilege(t *testing.T) {
	_, _, j := full(t)
	owned := "aws:ResourceTag/kubernetes.io/cluster/" + testCluster
	requested := "aws:RequestTag/kubernetes.io/cluster/" + testCluster
	// Karpenter's instances and templates carry the same cluster tags; only
	// the managed-by tag keeps nodewright off them during a migration.
	managed := "nodewright.io/managed-by"
	nodeRole := logicalID(t, j, "AWS::IAM::Role", "NodeRole")
	table := logicalID(t, j, "AWS::DynamoDB::Table", "Table")
	// The owner tag (the table's ARN) keeps a stack off another stack's
	// resources for the same cluster.
	ownerARN := js(map[string]interface{}{"Fn::GetAtt": []interface{}{table, "Arn"}})
	ownerKey := "nodewright.io/owner"
	seen := map[string]bool{}
	for _, s := range statements(j) {
		if s.Effect != "Allow" {
			continue
		}
		for _, a := range s.Actions {
			seen[a] = true
			if a == "*" || strings.HasSuffix(a, ":*") {
				t.Errorf("%s: service-wide action %q", s.Policy, a)
			}
		}
		res := js(s.Resources)
		if s.has("ec2:TerminateInstances") || s.has("ec2:DeleteLaunchTemplate") {
			if s.cond("StringEquals", owned) != "owned" {
				t.Errorf("%s: %v without %s=owned: %s", s.Policy, s.Actions, owned, js(s.Condition))
			}
			if s.cond("StringEquals", "aws:ResourceTag/"+managed) != "nodewright" {
				t.Errorf("%s: %v without aws:ResourceTag/%s=nodewright (would reach Karpenter's resources): %s", s.Policy, s.Actions, managed, js(s.Condition))
			}
			if js(s.cond("StringEquals", "aws:ResourceTag/"+ownerKey)) != ownerARN && js(s.cond("StringEqualsIfExists", "aws:ResourceTag/"+ownerKey)) != ownerARN {
				t.Errorf("%s: %v without aws:ResourceTag/%s = the table's ARN (would reach another stack's resources): %s", s.Policy, s.Actions, ownerKey, js(s.Condition))
			}
		}
		for _, a := range []string{"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags"} {
			if !s.has(a) {
				continue
			}
			switch {
			case s.cond("StringEquals", requested) == "owned":
				if s.cond("StringEquals", "aws:RequestTag/"+managed) != "nodewright" {
					t.Errorf("%s: %s request-tag condition lacks %s=nodewright", s.Policy, a, managed)
				}
				if js(s.cond("StringEquals", "aws:RequestTag/"+ownerKey)) != ownerARN {
					t.Errorf("%s: %s request-tag condition lacks %s = the table's ARN", s.Policy, a, ownerKey)
				}
				if s.cond("StringEquals", "aws:RequestTag/eks:eks-cluster-name") != testCluster && s.cond("StringEquals", "aws:RequestTag/karpenter.k8s.aws/cluster") != testCluster {
					t.Errorf("%s: %s request-tag condition lacks the cluster name tag", s.Policy, a)
				}
				// What is created is attributable: instances to a NodePool,
				// launch templates to an EC2NodeClass.
				if s.cond("StringLike", "aws:RequestTag/karpenter.sh/nodepool") != "*" && s.cond("StringLike", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass") != "*" {
					t.Errorf("%s: %s without a nodepool or ec2nodeclass request tag", s.Policy, a)
				}
				if strings.Contains(res, "launch-template/") != (s.cond("StringLike", "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass") == "*") {
					t.Errorf("%s: %s: launch templates must be tagged with their EC2NodeClass, instances with their NodePool", s.Policy, a)
				}
			case s.cond("StringEquals", owned) == "owned":
				if s.cond("StringEquals", "aws:ResourceTag/"+managed) != "nodewright" {
					t.Errorf("%s: %s on resources without %s=nodewright", s.Policy, a, managed)
				}
				// Tagging after creation must not be able to add the managed-by
				// tag, or Karpenter's instance could be made terminable.
				if a == "ec2:CreateTags" {
					keys := js(s.cond("ForAllValues:StringEquals", "aws:TagKeys"))
					if keys == "null" || strings.Contains(keys, managed) {
						t.Errorf("%s: CreateTags after creation may add %s (allowed keys %s)", s.Policy, managed, keys)
					}
				}
				if a == "ec2:CreateLaunchTemplate" {
					t.Errorf("%s: CreateLaunchTemplate must be conditioned on request tags", s.Policy)
				}
			default:
				// Only references to existing shared resources may go unconditioned.
				for _, r := range s.Resources {
					if a == "ec2:CreateTags" || a == "ec2:CreateLaunchTemplate" || !sharedLaunchResource.MatchString(js(r)) {
						t.Errorf("%s: %s on %s without a cluster tag condition", s.Policy, a, js(r))
					}
				}
			}
		}
		if s.has("iam:PassRole") {
			if strings.Contains(res, "*") || res != js([]interface{}{map[string]interface{}{"Fn::GetAtt": []interface{}{nodeRole, "Arn"}}}) {
				t.Errorf("%s: PassRole on %s, want only the node role", s.Policy, res)
			}
			if s.cond("StringEquals", "iam:PassedToService") != "ec2.amazonaws.com" {
				t.Errorf("%s: PassRole without iam:PassedToService=ec2.amazonaws.com", s.Policy)
			}
		}
		if s.has("ssm:GetParameter") && !strings.Contains(res, ":parameter/aws/service/*") {
			t.Errorf("%s: ssm:GetParameter on %s", s.Policy, res)
		}
		if s.has("eks:DescribeCluster") && !strings.Contains(res, ":cluster/"+testCluster) {
			t.Errorf("%s: eks:DescribeCluster on %s", s.Policy, res)
		}
		for _, a := range s.Actions {
			if strings.HasPrefix(a, "dynamodb:") {
				for _, r := range s.Resources {
					if !strings.Contains(js(r), table) {
						t.Errorf("%s: %s on %s, not the stack's table", s.Policy, a, js(r))
					}
				}
			}
			if strings.HasPrefix(a, "sqs:") && s.Principal == nil {
				for _, r := range s.Resources {
					if !strings.Contains(js(r), "Queue") {
						t.Errorf("%s: %s on %s, not the stack's queues", s.Policy, a, js(r))
					}
				}
			}
		}
		if s.Resources != nil && res == `["*"]` {
			for _, a := range s.Actions {
				if !strings.HasPrefix(a, "ec2:Describe") && a != "pricing:GetProducts" && !strings.HasPrefix(a, "ec2:") {
					t.Errorf("%s: %s on *", s.Policy, a)
				}
				if strings.HasPrefix(a, "ec2:Describe") && s.cond("StringEquals", "aws:RequestedRegion") == nil {
					t.Errorf("%s: %s on * not pinned to the region", s.Policy, a)
				}
			}
		}
	}
	for _, a := range []string{"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:CreateTags", "ec2:TerminateInstances",
		"ec2:DeleteLaunchTemplate", "iam:PassRole", "ssm:GetParameter", "pricing:GetProducts", "eks:DescribeCluster",
		"ec2:DescribeSpotPriceHistory", "sqs:ReceiveMessage", "sqs:SendMessage", "dynamodb:PutItem", "secretsmanager:GetSecretValue"} {
		if !seen[a] {
			t.Errorf("no policy grants %s", a)
		}
	}
}

func TestWebhookRoleIsolated(t *testing.T) {
	_, _, j := full(t)
	wh := logicalID(t, j, "AWS::IAM::Role", "WebhookRole")
	for _, p := range resources(j, "AWS::IAM::Policy") {
		if !strings.Contains(js(p.Props["Roles"]), wh) {
			continue
		}
		for _, s := range statements(map[string]interface{}{"Resources": map[string]interface{}{p.ID: p.Raw}}) {
			for _, a := range s.Actions {
				switch {
				case strings.HasPrefix(a, "logs:") || strings.HasPrefix(a, "secretsmanager:"):
				case a == "sqs:SendMessage" || a == "sqs:GetQueueAttributes" || a == "sqs:GetQueueUrl":
					if !strings.Contains(js(s.Resources), "ProvisionQueue") {
						t.Errorf("webhook role may %s on %s", a, js(s.Resources))
					}
				default:
					t.Errorf("webhook role may %s", a)
				}
			}
		}
	}
}

func TestAlarmsAndDashboard(t *testing.T) {
	_, tpl, j := full(t)
	alarms := resources(j, "AWS::CloudWatch::Alarm")
	var dlq, errorsN, throttles, pending int
	for _, a := range alarms {
		p := a.Props
		switch {
		case p["MetricName"] == "ApproximateNumberOfMessagesVisible":
			dlq++
		case p["MetricName"] == "Errors":
			errorsN++
		case p["MetricName"] == "Throttles":
			throttles++
		case p["MetricName"] == metrics.OldestPendingPodSeconds:
			pending++
			if p["Namespace"] != MetricsNamespace || p["Threshold"] != float64(300) ||
				js(p["Dimensions"]) != `[{"Name":"cluster","Value":"example"},{"Name":"function","Value":"provisioner"}]` {
				t.Errorf("oldest pending pod alarm = %s", js(p))
			}
		}
		if len(asList(p["AlarmActions"])) != 1 {
			t.Errorf("%s: alarm actions %v, want the alarm topic", a.ID, p["AlarmActions"])
		}
	}
	if dlq != 3 || errorsN != len(Functions) || throttles != 3 || pending != 1 {
		t.Errorf("alarms: dlq=%d errors=%d throttles=%d pending=%d", dlq, errorsN, throttles, pending)
	}
	check(t, "email subscription", func() {
		tpl.HasResourceProperties(jsii.String("AWS::SNS::Subscription"), map[string]interface{}{"Protocol": "email", "Endpoint": "oncall@example.com"})
	})
	check(t, "dashboard", func() { tpl.ResourceCountIs(jsii.String("AWS::CloudWatch::Dashboard"), jsii.Number(1)) })
	body := js(resources(j, "AWS::CloudWatch::Dashboard")[0].Props["DashboardBody"])
	for _, m := range DashboardMetrics {
		if !strings.Contains(body, `MetricName=\\\"`+m+`\\\"`) {
			t.Errorf("dashboard lacks %s", m)
		}
	}
}

func nagErrors(t *testing.T, st awscdk.Stack) []string {
	t.Helper()
	var out []string
	check(t, "nag annotations", func() {
		found := assertions.Annotations_FromStack(st).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		for _, m := range *found {
			//lint:ignore SA1019 the Go bindings offer no other accessor for an assertion message's id and entry
			out = append(out, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data))
		}
	})
	return out
}

func TestNag(t *testing.T) {
	s, _, _ := full(t)
	for _, e := range nagErrors(t, s.Stack) {
		t.Errorf("unsuppressed cdk-nag finding: %s", e)
	}
}

// The other shape: public endpoint, no webhook, RBAC access, an existing
// alarm topic, environment-agnostic.
func TestMinimalStack(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Webhook = false
	cfg.EKSAccess = AccessRBAC
	cfg.AlarmTopicArn = "arn:aws:sns:eu-west-1:111122223333:ops"
	cfg.Rebalance = RebalanceReplace
	cfg.LogRetentionDays = 7
	cfg.DisruptionRateMinutes = 5
	s, j := synthTemplate(t, cfg)
	if n := len(resources(j, "AWS::Lambda::Url")) + len(resources(j, "Custom::NodewrightWebhook")) + len(resources(j, "AWS::SecretsManager::Secret")); n != 0 {
		t.Errorf("webhook off but %d webhook resources", n)
	}
	// Without the webhook the registrar still applies the controllers' RBAC.
	if n := len(resources(j, "AWS::EKS::AccessEntry")); n != 3 {
		t.Fatalf("access entries = %d, want node, controller and registrar", n)
	}
	checkAccess(t, j, false)
	for _, f := range resources(j, "AWS::Lambda::Function") {
		if f.Props["VpcConfig"] != nil {
			t.Errorf("%s in a VPC without vpcId", f.ID)
		}
		if env := js(f.Props["Environment"]); strings.Contains(env, settings.EnvRebalance) && !strings.Contains(env, `"`+settings.EnvRebalance+`":"replace"`) {
			t.Errorf("%s: rebalance env %s", f.ID, env)
		}
	}
	var rates []string
	for _, r := range resources(j, "AWS::Events::Rule") {
		if e, ok := r.Props["ScheduleExpression"].(string); ok {
			rates = append(rates, e)
		}
	}
	sort.Strings(rates)
	if strings.Join(rates, ",") != "rate(1 minute),rate(1 minute),rate(5 minutes)" {
		t.Errorf("schedules = %v", rates)
	}
	for _, lg := range resources(j, "AWS::Logs::LogGroup") {
		if lg.Props["RetentionInDays"] != float64(7) {
			t.Errorf("%s retention %v", lg.ID, lg.Props["RetentionInDays"])
		}
	}
	for _, a := range resources(j, "AWS::CloudWatch::Alarm") {
		if js(a.Props["AlarmActions"]) != `["arn:aws:sns:eu-west-1:111122223333:ops"]` {
			t.Errorf("%s actions %s", a.ID, js(a.Props["AlarmActions"]))
		}
	}
	for _, e := range nagErrors(t, s.Stack) {
		t.Errorf("unsuppressed cdk-nag finding: %s", e)
	}
}

// The nag harness itself must be able to fail: an unencrypted queue without
// TLS enforcement is flagged.
func TestNagCatchesFindings(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	st := awscdk.NewStack(app, jsii.String("nag-canary"), nil)
	awssqs.NewQueue(st, jsii.String("Plain"), &awssqs.QueueProps{Encryption: awssqs.QueueEncryption_UNENCRYPTED})
	ApplyNag(app)
	errs := strings.Join(nagErrors(t, st), "\n")
	if !strings.Contains(errs, "AwsSolutions-SQS4") {
		t.Errorf("cdk-nag did not flag a queue without enforceSSL; findings:\n%s", errs)
	}
}

// cdk-nag's report proves the rules ran over the stack: every finding is
// either compliant or suppressed with a reason, none is open.
func TestNagReport(t *testing.T) {
	full(t)
	b, err := os.ReadFile(filepath.Join(testRoot, "full", "out", "AwsSolutions--"+StackName(testCluster)+"-NagReport.csv"))
	if err != nil {
		t.Fatal(err)
	}
	suppressed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		cols := strings.Split(line, "\",\"")
		if len(cols) < 4 {
			continue
		}
		rule := strings.TrimPrefix(cols[0], "\"")
		switch cols[2] {
		case "Non-Compliant":
			t.Errorf("open finding: %s", line)
		case "Suppressed":
			if len(cols[3]) < 40 {
				t.Errorf("suppression without a real reason: %s", line)
			}
			suppressed[rule] = true
		}
	}
	for _, r := range []string{"AwsSolutions-IAM4", "AwsSolutions-IAM5", "AwsSolutions-SMG4"} {
		if !suppressed[r] {
			t.Errorf("%s never evaluated (no suppressed finding): did cdk-nag run?", r)
		}
	}
}
