package infra

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
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
	return s, templateJSON(t, s)
}

// templateJSON synthesizes s and returns its template.
func templateJSON(t *testing.T, s *Stack) map[string]interface{} {
	t.Helper()
	var j map[string]interface{}
	check(t, "synth", func() {
		b, _ := json.Marshal(assertions.Template_FromStack(s.Stack, nil).ToJSON())
		_ = json.Unmarshal(b, &j)
	})
	if j == nil {
		t.Fatal("no template")
	}
	return j
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
