package infra

import (
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/settings"
)

// shadowWrites are the actions shadow mode must not be granted: every EC2
// write nodewright makes in normal mode, and passing a node role.
var shadowWrites = []string{"ec2:CreateFleet", "ec2:RunInstances", "ec2:CreateLaunchTemplate", "ec2:TerminateInstances",
	"ec2:CreateTags", "ec2:DeleteLaunchTemplate", "iam:PassRole"}

// In shadow mode (-c mode=shadow) the functions are told so, the
// controller role may read but not write EC2 nor pass a role, its access
// entry maps it to access.ShadowGroup alone (no access policy: EKS's view
// policies read Secrets or miss Nodes), which the registrar binds to the
// read-only shadow ClusterRole, and nothing else reaches the cluster at
// deploy: no webhook, no node entries.
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
	for _, typ := range []string{"Custom::NodewrightWebhook", "AWS::Lambda::Url"} {
		if n := len(resources(j, typ)); n != 0 {
			t.Errorf("shadow mode deploys %d %s", n, typ)
		}
	}
	ctrl := logicalID(t, j, "AWS::IAM::Role", "ControllerRole")
	reg := logicalID(t, j, "AWS::IAM::Role", "RegistrarRole")
	entries := resources(j, "AWS::EKS::AccessEntry")
	if len(entries) != 2 {
		t.Fatalf("access entries = %d, want the controller's and the registrar's (no node entries)", len(entries))
	}
	for _, e := range entries {
		switch principal := js(e.Props["PrincipalArn"]); {
		case strings.Contains(principal, ctrl):
			if js(e.Props["KubernetesGroups"]) != `["`+access.ShadowGroup+`"]` || e.Props["AccessPolicies"] != nil {
				t.Errorf("shadow controller access entry = %s, want group %s and no access policy", js(e.Props), access.ShadowGroup)
			}
		case strings.Contains(principal, reg):
			if !strings.Contains(js(e.Props["AccessPolicies"]), "AmazonEKSClusterAdminPolicy") {
				t.Errorf("registrar access entry without cluster-admin cannot create the shadow RBAC: %s", js(e.Props))
			}
		default:
			t.Errorf("unexpected access entry %s: %s", e.ID, js(e.Props))
		}
	}
	crs := resources(j, "Custom::NodewrightAccess")
	if len(crs) != 1 {
		t.Fatalf("Custom::NodewrightAccess = %d, want one", len(crs))
	}
	// Named apart from normal mode's (switching modes replaces it), and
	// without the table: its Delete releases no finalizer.
	if p := crs[0].Props; p["Mode"] != settings.ModeShadow || !strings.HasPrefix(js(p["Name"]), `"nodewright-shadow-`) || p["TableName"] != nil {
		t.Errorf("shadow Custom::NodewrightAccess = %s", js(p))
	}
	for _, f := range resources(j, "AWS::Lambda::Function") {
		if strings.Contains(js(f.Props["Role"]), ctrl) && !strings.Contains(js(f.Raw["DependsOn"]), crs[0].ID) {
			t.Errorf("controller function %s does not wait for shadow mode's RBAC", f.ID)
		}
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
