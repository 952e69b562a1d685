package infra

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

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
		CtxFeatureGates:      "SpotToSpotConsolidation=true",
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
		c.Rebalance != RebalanceReplace || c.FeatureGates != "SpotToSpotConsolidation=true" || !c.PlaceholderAssets || c.NodeRoleName != "nodewright-node-prod" || c.EKSAccess != AccessRBAC {
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
	c.FeatureGates = "NodeOverlay=true"
	err := c.Validate()
	if err == nil {
		t.Fatal("accepted a bad configuration")
	}
	for _, want := range []string{CtxClusterName + " is required", CtxConfigDir + " is required", CtxRebalance, CtxLogRetentionDays,
		CtxVpcID, CtxAlarmEmail, CtxProvisionerRate, CtxEKSAccess, CtxFeatureGates} {
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
	t.Run("instance profile whose role the stack is not told", func(t *testing.T) {
		nc := goodNodeConfig()
		nc.NodeClasses[0].Role, nc.NodeClasses[0].InstanceProfile = "", "KarpenterNodeInstanceProfile-example"
		_, err := NewStack(nil, "x", StackInput{Config: baseConfig(t), Loader: (&fakeLoader{cfg: nc}).load, StagingDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "testdata/config/default.yaml:38: spec.instanceProfile") || !strings.Contains(err.Error(), CtxInstanceProfileRoles) {
			t.Fatalf("err = %v", err)
		}
		nc.NodeClasses[0].InstanceProfile = "nodewright-example-nodewright-node-example"
		if _, err := checkNodeConfig(func() Config { c := baseConfig(t); _ = c.Validate(); return c }(), nc); err != nil {
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
