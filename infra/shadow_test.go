package infra

import (
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/settings"
)

// shadowWrites are the actions shadow mode must not be granted: every EC2
// write nodewright makes in normal mode, and passing a node role.
var shadowWrites = []string{"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:TerminateInstances",
	"ec2:CreateTags", "ec2:DeleteLaunchTemplate", "iam:PassRole"}

// In shadow mode (-c mode=shadow) the functions are told so, the
// controller role may read but not write EC2 nor pass a role, its access
// entry is EKS's view policy with no Kubernetes group, and nothing writes
// to the cluster at deploy: no webhook, no RBAC objects, no node entries.
func TestShadowModeGrantsReadsOnly(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Mode = settings.ModeShadow
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if cfg.Webhook {
		t.Fatal("shadow mode keeps the webhook")
	}
	s, j := synthTemplate(t, cfg)
	for _, st := range statements(j) {
		for _, a := range shadowWrites {
			if st.Effect == "Allow" && st.has(a) {
				t.Errorf("shadow mode allows %s (%s)", a, st.Policy)
			}
		}
	}
	reads := false
	for _, st := range statements(j) {
		reads = reads || st.has("ec2:DescribeInstances")
	}
	if !reads {
		t.Error("shadow mode cannot even describe instances")
	}
	for _, typ := range []string{"Custom::NodewrightAccess", "Custom::NodewrightWebhook", "AWS::Lambda::Url"} {
		if n := len(resources(j, typ)); n != 0 {
			t.Errorf("shadow mode deploys %d %s", n, typ)
		}
	}
	entries := resources(j, "AWS::EKS::AccessEntry")
	if len(entries) != 1 {
		t.Fatalf("access entries = %d, want the controller's only", len(entries))
	}
	if e := entries[0].Props; e["KubernetesGroups"] != nil || !strings.Contains(js(e["AccessPolicies"]), "cluster-access-policy/"+shadowAccessPolicy) {
		t.Errorf("controller access entry: %s", js(e))
	}
	for _, f := range resources(j, "AWS::Lambda::Function") {
		if env := js(f.Props["Environment"]); !strings.Contains(env, `"`+settings.EnvMode+`":"shadow"`) {
			t.Errorf("%s is not told it runs in shadow mode: %s", f.ID, env)
		}
	}
	for _, e := range nagErrors(t, s.Stack) {
		t.Errorf("unsuppressed cdk-nag finding: %s", e)
	}
}

func TestModeContext(t *testing.T) {
	cfg, err := FromContext(func(k string) interface{} {
		return map[string]interface{}{CtxMode: "shadow"}[k]
	})
	if err != nil || !cfg.Shadow() {
		t.Fatalf("-c mode=shadow: %+v %v", cfg.Mode, err)
	}
	cfg = baseConfig(t)
	cfg.Mode = "dry"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), CtxMode) {
		t.Errorf("mode=dry: %v", err)
	}
}
