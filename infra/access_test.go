package infra

import (
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/settings"
)

// Least privilege is the default: the controller role reaches the cluster
// only through its group, bound by the stack's Custom::NodewrightAccess to
// the ClusterRole of internal/access, and every controller function waits
// for that binding. Cluster-admin for the controllers is an explicit
// opt-in. The registrar keeps cluster-admin (it creates RBAC objects), so
// its role must be usable by its own function only.
func checkAccess(t *testing.T, j map[string]interface{}, controllerAdmin bool) {
	t.Helper()
	ctrl := logicalID(t, j, "AWS::IAM::Role", "ControllerRole")
	reg := logicalID(t, j, "AWS::IAM::Role", "RegistrarRole")
	for _, e := range resources(j, "AWS::EKS::AccessEntry") {
		principal, policies := js(e.Props["PrincipalArn"]), js(e.Props["AccessPolicies"])
		admin := strings.Contains(policies, "AmazonEKSClusterAdminPolicy")
		switch {
		case strings.Contains(principal, ctrl):
			if admin != controllerAdmin || (!controllerAdmin && js(e.Props["KubernetesGroups"]) != `["nodewright:controller"]`) {
				t.Errorf("controller access entry (cluster-admin wanted: %v) = %s", controllerAdmin, js(e.Props))
			}
		case strings.Contains(principal, reg):
			if !admin {
				t.Errorf("registrar access entry without cluster-admin cannot create RBAC: %s", js(e.Props))
			}
		case e.Props["Type"] != "EC2_LINUX":
			t.Errorf("unexpected access entry %s: %s", e.ID, js(e.Props))
		}
	}
	crs := resources(j, "Custom::NodewrightAccess")
	if len(crs) != 1 || !strings.HasPrefix(js(crs[0].Props["Name"]), `"nodewright-controller-`) {
		t.Fatalf("Custom::NodewrightAccess = %+v, want one, named per stack", crs)
	}
	if !strings.Contains(js(crs[0].Props["TableName"]), "Table") {
		t.Errorf("Custom::NodewrightAccess TableName = %s, want the claim table (its Delete releases Node finalizers)", js(crs[0].Props["TableName"]))
	}
	for _, f := range resources(j, "AWS::Lambda::Function") {
		role := js(f.Props["Role"])
		if strings.Contains(role, ctrl) && !strings.Contains(js(f.Raw["DependsOn"]), crs[0].ID) {
			t.Errorf("controller function %s does not wait for the controllers' RBAC (%s)", f.ID, js(f.Raw["DependsOn"]))
		}
		if strings.Contains(role, reg) && !strings.Contains(f.ID, "Webhookregistrar") {
			t.Errorf("function %s runs with the registrar's role", f.ID)
		}
	}
	// The registrar reads claims (to release its Nodes' finalizers on
	// delete) and writes nothing in the table.
	var regDynamo []string
	for _, st := range statements(j) {
		for _, a := range st.Actions {
			if strings.HasPrefix(st.Policy, "RegistrarRole") && strings.HasPrefix(a, "dynamodb:") {
				regDynamo = append(regDynamo, a)
			}
		}
	}
	if strings.Join(regDynamo, ",") != "dynamodb:Query" {
		t.Errorf("registrar DynamoDB actions = %v, want dynamodb:Query only", regDynamo)
	}
	// Nothing in the stack may pass the registrar's role to anything.
	for _, st := range statements(j) {
		for _, a := range st.Actions {
			if a == "iam:PassRole" || a == "iam:*" || a == "*" {
				if res := js(st.Resources); strings.Contains(res, reg) || strings.Contains(res, `"*"`) {
					t.Errorf("%s lets a principal pass the registrar role: %+v", st.Policy, st)
				}
			}
		}
	}
}

func TestClusterAdminIsOptIn(t *testing.T) {
	cfg := baseConfig(t)
	cfg.EKSAccess = AccessClusterAdmin
	_, j := synthTemplate(t, cfg)
	checkAccess(t, j, true)
}

// The repository's cdk.json is what `cdk deploy` uses unless told
// otherwise: its controller access must be least privilege (cluster-admin
// only by an explicit -c eksAccess=cluster-admin).
func TestRepositoryDefaultsAreLeastPrivilege(t *testing.T) {
	ctx := *cdkJSONContext(t)
	if v, ok := ctx[CtxEKSAccess]; ok && v != AccessRBAC {
		t.Errorf("cdk.json sets %s=%v; the default must be %s", CtxEKSAccess, v, AccessRBAC)
	}
}

// Normal mode (the default) maps the controller role to
// access.ControllerGroup and its access resource applies the controllers'
// ClusterRole: no Mode (or Mode normal), named for the controllers, with
// the table whose claims its Delete releases.
func TestNormalModeAccessIsTheControllerGroup(t *testing.T) {
	_, _, j := full(t)
	checkAccess(t, j, false)
	ctrl := logicalID(t, j, "AWS::IAM::Role", "ControllerRole")
	for _, e := range resources(j, "AWS::EKS::AccessEntry") {
		if strings.Contains(js(e.Props["PrincipalArn"]), ctrl) && js(e.Props["KubernetesGroups"]) != `["`+access.ControllerGroup+`"]` {
			t.Errorf("controller access entry = %s, want group %s", js(e.Props), access.ControllerGroup)
		}
	}
	for _, cr := range resources(j, "Custom::NodewrightAccess") {
		if m, ok := cr.Props["Mode"]; (ok && m != settings.ModeNormal) || !strings.HasPrefix(js(cr.Props["Name"]), `"nodewright-controller-`) {
			t.Errorf("normal mode's Custom::NodewrightAccess = %s, want the controllers' rights", js(cr.Props))
		}
	}
}
