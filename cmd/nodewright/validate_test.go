package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nodewright/nodewright/internal/apis/apistest"
)

const validPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["5"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  limits:
    cpu: "1000"
`

// validClass is the class validPool names. The pool stays literal YAML:
// TestValidateErrors edits it and expects errors at its lines 16 and 21.
var validClass = apistest.NodeClass{Role: "KarpenterNodeRole-demo", Discovery: "demo"}.YAML()

func runCLI(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	// A root of its own: the CLI's root command wires validate in too, but
	// this test must not depend on the other subcommands.
	cmd := &cobra.Command{Use: "nodewright", SilenceUsage: true}
	cmd.AddCommand(newValidateCmd())
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err = cmd.Execute()
	return out.String(), errb.String(), err
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestValidateOK(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"nodepools/default.yaml":      validPool,
		"ec2nodeclasses/default.yaml": validClass,
		"workloads/inflate.yaml":      "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: inflate\n",
	})
	out, errOut, err := runCLI(t, "validate", dir)
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, errOut)
	}
	want := "NodePool default: ok (nodeClassRef default, 3 requirements, limits cpu=1000, consolidation WhenEmptyOrUnderutilized after 0s, expireAfter 720h0m0s)\n" +
		"EC2NodeClass default: ok (alias al2023@latest, role KarpenterNodeRole-demo, 1 subnet term, 1 security group term)\n"
	if out != want {
		t.Errorf("stdout:\n%s\nwant:\n%s", out, want)
	}
	if !strings.Contains(errOut, `warning: `+dir+`/workloads/inflate.yaml:1: skipped apps/v1 Deployment "inflate": not a NodePool or EC2NodeClass`) {
		t.Errorf("stderr: %q", errOut)
	}
}

func TestValidateErrors(t *testing.T) {
	bad := strings.Replace(validPool, "operator: Gt", "operator: Ge", 1)
	bad = strings.Replace(bad, "name: default\n  limits", "name: missing\n  limits", 1)
	dir := writeFiles(t, map[string]string{
		"nodepools/default.yaml": bad,
		"classes.yaml":           validClass,
	})
	wd, _ := os.Getwd()
	t.Cleanup(func() { _ = os.Chdir(wd) })
	if err := os.Chdir(dir); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI(t, "validate", "nodepools", "classes.yaml")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 {
		t.Fatalf("want exit code 1, got %v", err)
	}
	if out != "" {
		t.Errorf("stdout on failure: %q", out)
	}
	want := `nodepools/default.yaml:16: spec.template.spec.requirements[2].operator: "Ge" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte` + "\n" +
		`nodepools/default.yaml:21: spec.template.spec.nodeClassRef.name: EC2NodeClass "missing" is not defined in the loaded files` + "\n" +
		"2 errors\n"
	if errOut != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", errOut, want)
	}
}

func TestValidateSeedExamples(t *testing.T) {
	seeds, _ := filepath.Glob(filepath.Join(examplesDir, "*", "*.yaml"))
	if len(seeds) == 0 {
		t.Fatal("no seed examples found")
	}
	for _, s := range seeds {
		out, errOut, err := runCLI(t, "validate", s)
		if err != nil {
			t.Errorf("%s: %v\n%s", s, err, errOut)
			continue
		}
		if strings.Contains(s, "v1beta1") != strings.Contains(errOut, "is deprecated") {
			t.Errorf("%s: deprecation warnings %q", s, errOut)
		}
		if !strings.Contains(out, ": ok (") && !strings.Contains(s, "workloads") {
			t.Errorf("%s: %q", s, out)
		}
	}
}

func TestValidateUsage(t *testing.T) {
	if _, errOut, err := runCLI(t, "validate"); err == nil || !strings.Contains(errOut, "Error: validate needs at least one file or directory\nUsage:") {
		t.Errorf("validate without paths: %v %q", err, errOut)
	}
	out, _, err := runCLI(t, "validate", "--help")
	if err != nil || !strings.Contains(out, "FILE:LINE: FIELD: MESSAGE") {
		t.Errorf("help: %v %q", err, out)
	}
	_, errOut, err := runCLI(t, "validate", "does-not-exist.yaml")
	if err == nil || errOut != "does-not-exist.yaml: no such file or directory\n1 error\n" {
		t.Errorf("missing file: %v %q", err, errOut)
	}
}

// Karpenter v1.14's later fields (static pools, the Balanced policy,
// placement groups) are honoured, so they load without a warning.
func TestValidateLoadsV114FieldsSilently(t *testing.T) {
	static := strings.Replace(validPool, `    cpu: "1000"`, `    nodes: "3"`, 1) + "  replicas: 2\n"
	balanced := strings.Replace(validPool, "name: default", "name: balanced", 1) + "  disruption:\n    consolidationPolicy: Balanced\n    consolidateAfter: 1m\n"
	dir := writeFiles(t, map[string]string{
		"pool.yaml":     static,
		"balanced.yaml": balanced,
		"class.yaml":    validClass + "  placementGroupSelector:\n    name: training\n",
	})
	_, errOut, err := runCLI(t, "validate", dir)
	if err != nil {
		t.Fatalf("validate: %v\n%s", err, errOut)
	}
	if strings.Contains(errOut, "warning:") {
		t.Errorf("a warning:\n%s", errOut)
	}
}
