package infra

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// synthEnv is an environment with no AWS credentials and no way out: proxies
// point at a closed loopback port and the Go module proxy is off, so any
// network call the synth made would fail it.
func synthEnv(t *testing.T) []string {
	t.Helper()
	var env []string
	for _, kv := range os.Environ() {
		k := kv[:strings.IndexByte(kv, '=')]
		if strings.HasPrefix(k, "AWS_") || strings.HasPrefix(k, "CDK_") || strings.Contains(strings.ToLower(k), "proxy") {
			continue
		}
		env = append(env, kv)
	}
	goenv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatalf("go env %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	home := t.TempDir()
	return append(env,
		"HOME="+home,
		// Keep the caches: a cold CDK compile takes minutes.
		"GOCACHE="+goenv("GOCACHE"), "GOMODCACHE="+goenv("GOMODCACHE"), "GOPATH="+goenv("GOPATH"),
		"GOPROXY=off", "GOFLAGS=-mod=readonly",
		"AWS_CONFIG_FILE="+filepath.Join(home, "no-config"),
		"AWS_SHARED_CREDENTIALS_FILE="+filepath.Join(home, "no-credentials"),
		"AWS_EC2_METADATA_DISABLED=true",
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9",
		"http_proxy=http://127.0.0.1:9", "https_proxy=http://127.0.0.1:9",
		"NO_PROXY=", "no_proxy=",
	)
}

// TestCDKSynth runs the real pinned CDK CLI over the real app (what `make
// synth` runs): a valid configuration synthesizes a cloud assembly, a bad
// file fails with its file:line:field message.
func TestCDKSynth(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the CDK CLI and compiles the app: not in -short mode")
	}
	for _, tool := range []string{"node", "npm", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed: %v", tool, err)
		}
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(root, "infra", "synth.sh")
	run := func(t *testing.T, env []string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Dir = root
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}
	// Installing the CLI needs the npm registry; synthesizing must not.
	if out, err := run(t, os.Environ(), "--install-only"); err != nil {
		t.Fatalf("install the pinned CDK CLI: %v\n%s", err, out)
	}
	env := synthEnv(t)

	// synthesize runs the synth over configDir and returns the stack's
	// template and the cloud assembly's folder.
	synthesize := func(t *testing.T, configDir string) (map[string]interface{}, string) {
		outDir := t.TempDir()
		out, err := run(t, append(env, "CLUSTER_NAME="+testCluster, "CONFIG_DIR="+configDir), "--output", outDir)
		if err != nil {
			t.Fatalf("cdk synth: %v\n%s", err, out)
		}
		b, err := os.ReadFile(filepath.Join(outDir, StackName(testCluster)+".template.json"))
		if err != nil {
			t.Fatalf("no template in the cloud assembly: %v\n%s", err, out)
		}
		var tpl map[string]interface{}
		if err := json.Unmarshal(b, &tpl); err != nil {
			t.Fatal(err)
		}
		return tpl, outDir
	}

	t.Run("valid configuration", func(t *testing.T) {
		tpl, outDir := synthesize(t, "infra/testdata/config")
		for typ, want := range map[string]int{
			"AWS::Lambda::Function": len(Functions), "AWS::DynamoDB::Table": 1, "AWS::SQS::Queue": 8,
			// The example's second EC2NodeClass names an existing role: one
			// more instance profile and node access entry.
			"Custom::NodewrightWebhook": 1, "AWS::EKS::AccessEntry": 4, "AWS::IAM::InstanceProfile": 2,
		} {
			if got := len(resources(tpl, typ)); got != want {
				t.Errorf("%s: %d in the synthesized template, want %d", typ, got, want)
			}
		}
		if _, err := os.Stat(filepath.Join(outDir, "manifest.json")); err != nil {
			t.Errorf("cloud assembly has no manifest: %v", err)
		}
	})

	t.Run("every v1.14 field", func(t *testing.T) {
		tpl, _ := synthesize(t, "infra/testdata/everyfield")
		assertEveryFieldTemplate(t, tpl)
	})

	t.Run("bad configuration fails with file line and field", func(t *testing.T) {
		out, err := run(t, append(env, "CLUSTER_NAME="+testCluster, "CONFIG_DIR=infra/testdata/bad-config"), "--output", t.TempDir())
		if err == nil {
			t.Fatalf("cdk synth accepted a bad file:\n%s", out)
		}
		want := "infra/testdata/bad-config/default.yaml:10: spec.template.spec.requirements[0].operator"
		if !strings.Contains(out, want) {
			t.Errorf("synth output does not name %q:\n%s", want, out)
		}
	})
}

// assertEveryFieldTemplate checks what testdata/everyfield asks of IAM: its
// one role gets an instance profile and an EC2_LINUX access entry, is the
// only role the functions may pass (no class uses the stack's), and its
// ssmParameter is readable.
func assertEveryFieldTemplate(t *testing.T, tpl map[string]interface{}) {
	t.Helper()
	var profiles, nodeEntries []string
	for _, p := range resources(tpl, "AWS::IAM::InstanceProfile") {
		profiles = append(profiles, js(p.Props["Roles"]))
	}
	for _, e := range resources(tpl, "AWS::EKS::AccessEntry") {
		if typ, _ := e.Props["Type"].(string); typ == "EC2_LINUX" {
			nodeEntries = append(nodeEntries, js(e.Props["PrincipalArn"]))
		}
	}
	// The stack's own node role always has its profile and entry.
	if !slices.Contains(profiles, `["MLNodeRole"]`) || len(profiles) != 2 {
		t.Errorf("instance profiles of %v, want MLNodeRole's and the stack's", profiles)
	}
	if !slices.ContainsFunc(nodeEntries, func(e string) bool { return strings.Contains(e, "role/MLNodeRole") }) || len(nodeEntries) != 2 {
		t.Errorf("node access entries %v, want MLNodeRole's and the stack's", nodeEntries)
	}
	pass := js(statementResources(tpl, "PassNodeRolesToEC2Only"))
	if !strings.Contains(pass, "role/MLNodeRole") || strings.Count(pass, "role/") != 1 {
		t.Errorf("iam:PassRole on %s, want MLNodeRole only", pass)
	}
	if ssm := js(statementResources(tpl, "AMIParameters")); !strings.Contains(ssm, "parameter/ml/training/ami-id") {
		t.Errorf("ssm:GetParameter on %s misses the class's ssmParameter", ssm)
	}
}

// statementResources returns the Resource of every policy statement with sid.
func statementResources(tpl map[string]interface{}, sid string) []interface{} {
	var out []interface{}
	for _, p := range resources(tpl, "AWS::IAM::Policy") {
		doc, _ := p.Props["PolicyDocument"].(map[string]interface{})
		for _, st := range asList(doc["Statement"]) {
			if m, _ := st.(map[string]interface{}); m["Sid"] == sid {
				out = append(out, m["Resource"])
			}
		}
	}
	return out
}
