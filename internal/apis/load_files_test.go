package apis

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadDirectoriesAndWarnings(t *testing.T) {
	dir := t.TempDir()
	write := func(rel, content string) {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("nodepools/default.yaml", pool)
	write("classes/default.yml", "---\n# comment only\n---\n"+class+"---\n")
	write("workloads/inflate.json", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"inflate"}}`)
	write("README.md", "not yaml: [")
	write(".hidden/broken.yaml", "this: [is broken")
	write("values.yaml", "replicas: 3\n")
	cfg, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NodePools) != 1 || len(cfg.NodeClasses) != 1 {
		t.Fatalf("got %d pools %d classes", len(cfg.NodePools), len(cfg.NodeClasses))
	}
	var ws []string
	for _, w := range cfg.Warnings {
		ws = append(ws, strings.TrimPrefix(w.String(), dir+"/"))
	}
	want := []string{
		`values.yaml:1: skipped: not a Kubernetes object (no apiVersion or kind)`,
		`workloads/inflate.json:1: skipped apps/v1 Deployment "inflate": not a NodePool or EC2NodeClass`,
	}
	if strings.Join(ws, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(ws, "\n"), strings.Join(want, "\n"))
	}
	if src := cfg.Sources[ObjectKey{Kind: EC2NodeClassKind, Name: "default"}]; src.File != filepath.Join(dir, "classes/default.yml") || src.Line != 4 {
		t.Errorf("class source %+v", src)
	}

	// Errors from several files come back together, ordered by file.
	write("nodepools/bad.yaml", edit(pool, "name: default\nspec", "name: bad\nspec", "weight: 10", "weight: 0"))
	write("classes/bad.yaml", edit(class, "name: default", "name: bad", "  role: KarpenterNodeRole-demo\n", ""))
	_, err = Load(filepath.Join(dir, "nodepools"), filepath.Join(dir, "classes"), filepath.Join(dir, "missing.yaml"))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("want ErrorList, got %v", err)
	}
	var got []string
	for _, e := range list {
		got = append(got, strings.TrimPrefix(e.Error(), dir+"/"))
	}
	wantErrs := []string{
		`classes/bad.yaml:5: spec: must specify exactly one of ['role', 'instanceProfile']`,
		`missing.yaml: no such file or directory`,
		`nodepools/bad.yaml:39: spec.weight: 0 is outside 1..100`,
	}
	if strings.Join(got, "\n") != strings.Join(wantErrs, "\n") {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantErrs, "\n"))
	}

	// An empty directory is an error, not a silent success.
	empty := t.TempDir()
	if _, err := Load(empty); err == nil || !strings.Contains(err.Error(), "no .yaml, .yml or .json files") {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := Load(); err == nil {
		t.Error("Load() with no paths succeeded")
	}
}

func TestNeverMatchingRequirementWarns(t *testing.T) {
	doc := edit(pool, `values: ["spot"]`, `values: ["spot", "ondemand"]`, `values: ["amd64"]`, `values: ["x86_64"]`) + "---\n" + class
	cfg, err := LoadData("lint.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range cfg.Warnings {
		got = append(got, w.String())
	}
	want := []string{
		`lint.yaml:14: spec.template.spec.requirements[0].values[1]: "ondemand" never matches: karpenter.sh/capacity-type is one of spot, on-demand, reserved`,
		`lint.yaml:17: spec.template.spec.requirements[1].values[0]: "x86_64" never matches: kubernetes.io/arch is one of amd64, arm64`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestYAMLFeatures(t *testing.T) {
	// Anchors, aliases and merge keys work as in kubectl.
	doc := `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: r
  subnetSelectorTerms:
    - tags: &discovery
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        <<: *discovery
        tier: web
`
	cfg, err := LoadData("anchors.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	tags := cfg.NodeClass("default").Spec.SecurityGroupSelectorTerms[0].Tags
	if tags["karpenter.sh/discovery"] != "demo" || tags["tier"] != "web" {
		t.Errorf("merged tags %v", tags)
	}

	// A billion-laughs document is refused, not expanded: values that go
	// through json.Unmarshaler (here a Quantity) would otherwise be expanded.
	defs := "x-defs:\n  a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h"} {
		defs += "  " + n + ": &" + n + " [" + strings.TrimSuffix(strings.Repeat("*"+prev+", ", 10), ", ") + "]\n"
		prev = n
	}
	bomb := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: x\n" + defs + "spec:\n  limits:\n    cpu: *h\n"
	start := time.Now()
	_, err = LoadData("bomb.yaml", []byte(bomb))
	if err == nil || !strings.Contains(err.Error(), ": document too large (more than 100000 YAML nodes after expanding aliases)") {
		t.Errorf("bomb: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("bomb took %v", d)
	}
}
