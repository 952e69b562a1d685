package infra

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/settings"
)

// The registrar's environment holds exactly the properties of the custom
// resources it serves (the CA bundle as its digest), so it can refuse an
// invocation that names another webhook URL, CA, secret, table or binding.
func TestRegistrarTrustsItsStacksProperties(t *testing.T) {
	_, _, j := full(t)
	id := logicalID(t, j, "AWS::Lambda::Function", exportID("webhookregistrar")+"Function")
	var raw interface{}
	for _, r := range resources(j, "AWS::Lambda::Function") {
		if r.ID == id {
			env, _ := r.Props["Environment"].(map[string]interface{})
			vars, _ := env["Variables"].(map[string]interface{})
			raw = vars[settings.EnvRegistrarTrust]
		}
	}
	if raw == nil {
		t.Fatalf("the registrar has no %s", settings.EnvRegistrarTrust)
	}
	var trusted map[string]map[string]string
	if err := json.Unmarshal([]byte(render(raw)), &trusted); err != nil {
		t.Fatalf("%s: %v (%s)", settings.EnvRegistrarTrust, err, render(raw))
	}
	seen := 0
	for _, typ := range []string{"Custom::NodewrightWebhook", "Custom::NodewrightAccess"} {
		for _, cr := range resources(j, typ) {
			seen++
			want := map[string]string{}
			for k, v := range cr.Props {
				switch k {
				case "ServiceToken", "ServiceTimeout": // CloudFormation's own
				case "CABundle":
					want[admission.CABundleDigestProperty] = admission.CABundleDigest(v.(string))
				default:
					want[k] = render(v)
				}
			}
			got := maps.Clone(trusted[typ])
			if typ == "Custom::NodewrightAccess" {
				if got["StackTableName"] == "" {
					t.Errorf("%s: the stack's table is not trusted", typ)
				}
				delete(got, "StackTableName")
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%s: registrar trusts %v, the resource has %v", typ, got, want)
			}
		}
	}
	if seen != 2 || len(trusted) != 2 {
		t.Errorf("%d custom resources, %d trusted types; want 2 and 2", seen, len(trusted))
	}
}

// render writes a template value as text, intrinsics as placeholders, so a
// value and the JSON text built from it compare equal.
func render(v interface{}) string {
	switch x := v.(type) {
	case string:
		return x
	case map[string]interface{}:
		if ref, ok := x["Ref"]; ok {
			return fmt.Sprintf("${Ref:%v}", ref)
		}
		if att, ok := x["Fn::GetAtt"].([]interface{}); ok {
			return fmt.Sprintf("${GetAtt:%v.%v}", att[0], att[1])
		}
		if join, ok := x["Fn::Join"].([]interface{}); ok {
			var parts []string
			for _, p := range join[1].([]interface{}) {
				parts = append(parts, render(p))
			}
			return strings.Join(parts, join[0].(string))
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}
