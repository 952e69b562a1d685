package access

import (
	"reflect"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// Shadow mode's ClusterRole reads and does nothing else: only get, list
// and watch, no Secret (nor any wildcard that would include one), and
// exactly the controllers' reads of the cluster (shadow mode runs their
// passes), less the Events they read back only to count a repeat they
// write. Its binding names ShadowGroup alone.
func TestShadowModeGrantsReadsOnly(t *testing.T) {
	role := ShadowClusterRole("nodewright-shadow-x")
	if role.Name != "nodewright-shadow-x" || role.Labels[ManagedByLabel] != ManagedByValue {
		t.Errorf("shadow ClusterRole metadata %+v", role.ObjectMeta)
	}
	for _, r := range role.Rules {
		for _, v := range r.Verbs {
			if !slices.Contains([]string{"get", "list", "watch"}, v) {
				t.Errorf("shadow rule %+v grants %q", r, v)
			}
		}
		for _, res := range r.Resources {
			if res == "secrets" || res == "*" || res == "configmaps" || res == "events" {
				t.Errorf("shadow rule %+v reads %s", r, res)
			}
		}
		if slices.Contains(r.APIGroups, "*") || len(r.NonResourceURLs) > 0 || len(r.ResourceNames) > 0 {
			t.Errorf("shadow rule %+v is wider than named resources", r)
		}
	}
	var controllerReads []rbacv1.PolicyRule
	for _, r := range ControllerClusterRole("c").Rules {
		if reflect.DeepEqual(r.Verbs, []string{"get", "list", "watch"}) {
			controllerReads = append(controllerReads, r)
		}
	}
	if !reflect.DeepEqual(role.Rules, controllerReads) {
		t.Errorf("shadow rules %+v, want the controllers' reads %+v", role.Rules, controllerReads)
	}
	for _, want := range []string{"nodes", "pods", "persistentvolumes", "persistentvolumeclaims", "poddisruptionbudgets", "storageclasses", "csinodes"} {
		if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, want) }) {
			t.Errorf("shadow mode cannot read %s, which its planning needs", want)
		}
	}
	b := ShadowClusterRoleBinding("nodewright-shadow-x")
	if b.RoleRef.Name != role.Name || len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.GroupKind || b.Subjects[0].Name != ShadowGroup {
		t.Errorf("shadow binding %+v", b)
	}
	if c := ControllerClusterRoleBinding("c"); c.Subjects[0].Name != ControllerGroup {
		t.Errorf("controller binding %+v", c)
	}
}
