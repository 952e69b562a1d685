package infra

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadWithAPIs(t *testing.T) {
	files, err := ConfigFiles(filepath.Join("testdata", "config"))
	if err != nil {
		t.Fatal(err)
	}
	nc, err := LoadWithAPIs(files...)
	if err != nil {
		t.Fatalf("valid configuration rejected: %v", err)
	}
	// The example keeps a second class on an existing role and a third
	// with a customer managed key (the local cloud's IAM tests launch
	// with them).
	if strings.Join(nc.NodePools, ",") != "default" || len(nc.NodeClasses) != 3 || nc.NodeClasses[0].Role != DefaultNodeRoleName(testCluster) ||
		nc.NodeClasses[1].Role != "existing-karpenter-node-role" || nc.NodeClasses[1].Windows ||
		strings.Join(nc.NodeClasses[2].KMSKeys, ",") != "0a1b2c3d-0000-4000-8000-00000000e65e" {
		t.Errorf("summary = %+v", nc)
	}
	if !strings.HasPrefix(nc.NodeClasses[0].Source, filepath.Join("testdata", "config", "default.yaml")+":") {
		t.Errorf("source = %q, want file:line", nc.NodeClasses[0].Source)
	}
	cfg := baseConfig(t)
	cfg.NodeRoleName = DefaultNodeRoleName(testCluster)
	if _, err := checkNodeConfig(cfg, nc); err != nil {
		t.Errorf("example configuration does not fit the stack: %v", err)
	}

	bad, err := ConfigFiles(filepath.Join("testdata", "bad-config"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadWithAPIs(bad...)
	if err == nil {
		t.Fatal("bad configuration accepted")
	}
	want := filepath.Join("testdata", "bad-config", "default.yaml") + ":10: spec.template.spec.requirements[0].operator"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name %q", err, want)
	}
}
