package apis

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// examplesDir holds the user-facing example configurations, one directory
// per configuration (a configDir on its own), copied from the seed pages; the
// workloads directory holds the inflate Deployment the README scales.
var examplesDir = filepath.Join("..", "..", "infra", "examples")

// TestSeedExamplesLoad loads every NodePool/EC2NodeClass example copied from
// the seed pages (infra/examples/*/): each file on its own must load without
// errors, v1beta1 files must carry a deprecation warning and v1 files none.
func TestSeedExamplesLoad(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(examplesDir, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var examples int
	for _, f := range files {
		if strings.Contains(f, "/workloads/") {
			continue
		}
		examples++
		t.Run(f, func(t *testing.T) {
			cfg, err := Load(f)
			if err != nil {
				t.Fatalf("Load(%s):\n%v", f, err)
			}
			if len(cfg.NodePools) == 0 && len(cfg.NodeClasses) == 0 {
				t.Fatalf("no objects loaded from %s", f)
			}
			beta := strings.Contains(f, "v1beta1")
			deprecated := 0
			for _, w := range cfg.Warnings {
				if strings.Contains(w.Message, "is deprecated; converted to") {
					deprecated++
				}
			}
			if beta && deprecated != len(cfg.NodePools)+len(cfg.NodeClasses) {
				t.Errorf("want a deprecation warning per v1beta1 object (%d), got %d: %v", len(cfg.NodePools)+len(cfg.NodeClasses), deprecated, cfg.Warnings)
			}
			if !beta && deprecated != 0 {
				t.Errorf("v1 file has deprecation warnings: %v", cfg.Warnings)
			}
			for _, np := range cfg.NodePools {
				if cfg.NodeClassFor(np) == nil {
					t.Errorf("NodePool %s: nodeClassRef %v does not resolve", np.Name, np.Spec.Template.Spec.NodeClassRef)
				}
				if np.APIVersion != NodePoolAPIV1 {
					t.Errorf("NodePool %s: apiVersion %q after load", np.Name, np.APIVersion)
				}
			}
			for _, nc := range cfg.NodeClasses {
				if nc.AMIFamily() == "" {
					t.Errorf("EC2NodeClass %s: no AMI family after conversion", nc.Name)
				}
			}
		})
	}
	if examples < 10 {
		t.Fatalf("only %d seed example files found; infra/examples is incomplete", examples)
	}
}

// TestSeedExpectations pins what the seed examples contain after loading, so
// a loader change that silently drops or rewrites fields is caught.
func TestSeedExpectations(t *testing.T) {
	cfg, err := Load(filepath.Join(examplesDir, "default", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	np := cfg.NodePool("default")
	if np == nil {
		t.Fatal("NodePool default missing")
	}
	if got := len(np.Spec.Template.Spec.Requirements); got != 5 {
		t.Errorf("requirements: got %d, want 5", got)
	}
	if d, _ := np.Spec.Template.Spec.ExpireAfter.Get(); d.String() != "72h0m0s" {
		t.Errorf("expireAfter: got %v", np.Spec.Template.Spec.ExpireAfter)
	}
	if got := np.Spec.Limits["cpu"]; got.String() != "1k" && got.Value() != 1000 {
		t.Errorf("limits.cpu: got %s", got.String())
	}
	if len(np.Spec.Disruption.Budgets) != 2 || *np.Spec.Disruption.Budgets[1].Schedule != "0 9 * * MON-FRI" {
		t.Errorf("budgets: %+v", np.Spec.Disruption.Budgets)
	}
	if *np.Spec.Weight != 50 {
		t.Errorf("weight %d", *np.Spec.Weight)
	}
	nc := cfg.NodeClass("default")
	if nc.AMIAlias() != "al2023@latest" || nc.AMIFamily() != AMIFamilyAL2023 {
		t.Errorf("alias %q family %q", nc.AMIAlias(), nc.AMIFamily())
	}
	if *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit != 2 {
		t.Errorf("hop limit %d", *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit)
	}
	if !strings.Contains(*nc.Spec.UserData, "Karpenter managed node") {
		t.Errorf("userData %q", *nc.Spec.UserData)
	}
	if got := nc.Spec.BlockDeviceMappings[0].EBS.VolumeSize.String(); got != "100Gi" {
		t.Errorf("volumeSize %s", got)
	}

	// v1beta1 page: conversion results.
	cfg, err = Load(filepath.Join(examplesDir, "v1beta1-default", "default.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	np = cfg.NodePool("default")
	if np.Spec.Disruption.ConsolidationPolicy != ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("policy %s", np.Spec.Disruption.ConsolidationPolicy)
	}
	if d, ok := np.Spec.Disruption.ConsolidateAfter.Get(); !ok || d != 0 {
		t.Errorf("consolidateAfter %v", np.Spec.Disruption.ConsolidateAfter)
	}
	if d, _ := np.Spec.Template.Spec.ExpireAfter.Get(); d.Hours() != 720 {
		t.Errorf("expireAfter %v", np.Spec.Template.Spec.ExpireAfter)
	}
	if ref := np.Spec.Template.Spec.NodeClassRef; *ref != (NodeClassReference{Group: AWSGroup, Kind: EC2NodeClassKind, Name: "default"}) {
		t.Errorf("nodeClassRef %+v", ref)
	}
	nc = cfg.NodeClass("default")
	if nc.AMIAlias() != "al2@latest" || nc.Spec.AMIFamily != nil {
		t.Errorf("alias %q amiFamily %v", nc.AMIAlias(), nc.Spec.AMIFamily)
	}
	if src := cfg.Sources[ObjectKey{Kind: NodePoolKind, Name: "default"}]; src.APIVersion != NodePoolAPIBeta || src.Line != 3 {
		t.Errorf("source %+v", src)
	}

	// The NodeClaim on the v1 page is skipped with a warning.
	cfg, err = Load(filepath.Join(examplesDir, "worker-scalable", "worker-scalable.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range cfg.Warnings {
		found = found || strings.Contains(w.String(), `skipped NodeClaim "worker-scalable-abc123"`)
	}
	if !found {
		t.Errorf("no NodeClaim warning in %v", cfg.Warnings)
	}
}

// TestSeedsFromSharedPages checks, when ../shared is present, that every
// NodePool/EC2NodeClass name on the seed pages has a copy in infra/examples.
func TestSeedsFromSharedPages(t *testing.T) {
	seeds := filepath.Join("..", "..", "..", "shared", "seeds")
	pages, _ := filepath.Glob(filepath.Join(seeds, "*.txt"))
	if len(pages) == 0 {
		t.Skip("../shared/seeds not present")
	}
	names := map[string]bool{}
	for _, f := range mustGlob(t, filepath.Join(examplesDir, "*", "*.yaml")) {
		cfg, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, np := range cfg.NodePools {
			names["NodePool/"+np.Name] = true
		}
		for _, nc := range cfg.NodeClasses {
			names["EC2NodeClass/"+nc.Name] = true
		}
	}
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i, line := range lines {
			kind := strings.TrimSpace(line)
			if kind != "kind: NodePool" && kind != "kind: EC2NodeClass" {
				continue
			}
			// The name follows within a few non-empty lines (metadata: name: x).
			for j := i + 1; j < len(lines) && j < i+8; j++ {
				l := strings.TrimSpace(lines[j])
				if n, ok := strings.CutPrefix(l, "name: "); ok {
					key := strings.TrimPrefix(kind, "kind: ") + "/" + n
					if !names[key] {
						t.Errorf("%s:%d: %s has no copy in infra/examples", filepath.Base(p), i+1, key)
					}
					break
				}
			}
		}
	}
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil || len(m) == 0 {
		t.Fatalf("glob %s: %v (%d matches)", pattern, err, len(m))
	}
	return m
}

// TestLegacySeedRejected: the v1alpha5 Provisioner / v1alpha1 AWSNodeTemplate
// page (004) is not loadable; both objects get a migration message.
func TestLegacySeedRejected(t *testing.T) {
	_, err := Load("testdata/legacy/provisioner-v1alpha5.yaml")
	want := "testdata/legacy/provisioner-v1alpha5.yaml:6: kind: karpenter.sh/v1alpha5 Provisioner is not supported: migrate it to a karpenter.sh/v1 NodePool\n" +
		"testdata/legacy/provisioner-v1alpha5.yaml:25: kind: karpenter.k8s.aws/v1alpha1 AWSNodeTemplate is not supported: migrate it to a karpenter.k8s.aws/v1 EC2NodeClass"
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}
