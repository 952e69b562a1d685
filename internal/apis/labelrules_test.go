package apis

import (
	"errors"
	"strings"
	"testing"
)

// Sources the cases cite (all at v1.14.1):
//   - CRD: karpenter-provider-aws pkg/apis/crds/karpenter.sh_nodepools.yaml,
//     the CEL rules on spec.template.metadata.labels and requirements[].key;
//   - CEL test: sigs.k8s.io/karpenter pkg/apis/v1/nodepool_validation_cel_test.go;
//   - runtime: sigs.k8s.io/karpenter pkg/apis/v1/labels.go IsRestrictedLabel
//     (with the provider's WellKnownLabels from its pkg/apis/v1/labels.go),
//     nodeclaim_validation.go ValidateRequirement / validateWellKnownValues.

// requirementAt1 replaces the pool's second requirement (kubernetes.io/arch,
// key on line 15, operator 16, values 17) with key/operator/values.
func requirementAt1(key, operator, values string) string {
	return edit(pool, "- key: kubernetes.io/arch\n          operator: In\n          values: [\"amd64\"]",
		"- key: "+key+"\n          operator: "+operator+"\n          values: "+values)
}

// templateLabel replaces the pool's template label (line 9).
func templateLabel(key string) string { return edit(pool, "team: platform", key+": x") }

const runtimeMsg = " is not allowed as it might interfere with the internal provisioning logic; " +
	"specify a well known label, or a custom label that does not use a restricted domain: karpenter.sh, karpenter.k8s.aws"

func TestLabelRulesOfKarpenterV114(t *testing.T) {
	req := "nodepools/default.yaml:15: spec.template.spec.requirements[1].key: "
	lbl := func(k string) string { return "nodepools/default.yaml:9: spec.template.metadata.labels[" + k + "]: " }
	cases := []struct {
		name, source, doc string
		want              []string // nil: accepted
	}{
		// Requirement keys.
		{"requirement instance-tenancy", "CRD key rule list; runtime: provider WellKnownLabels",
			requirementAt1("karpenter.k8s.aws/instance-tenancy", "In", `["default"]`), nil},
		{"requirement instance-capability-flex", "CRD key rule list; runtime: provider WellKnownLabels",
			requirementAt1("karpenter.k8s.aws/instance-capability-flex", "In", `["true"]`), nil},
		{"requirement placement-group-partition", "CRD key rule list; runtime: provider WellKnownLabels",
			requirementAt1("karpenter.k8s.aws/placement-group-partition", "Exists", "[]"), nil},
		{"requirement capacity-reservation-interruptible", "CRD key rule list; runtime: provider WellKnownLabels",
			requirementAt1("karpenter.k8s.aws/capacity-reservation-interruptible", "In", `["false"]`), nil},
		{"requirement topology.k8s.aws/zone-id", "runtime: provider WellKnownLabels (LabelTopologyZoneID)",
			requirementAt1("topology.k8s.aws/zone-id", "In", `["use1-az1"]`), nil},
		{"requirement kubernetes.io domain", `CEL test "should allow kubernetes domains"`,
			requirementAt1("kubernetes.io/test", "In", `["test"]`), nil},
		{"requirement k8s.io domain", `CEL test "should allow kubernetes domains"`,
			requirementAt1("k8s.io/test", "In", `["test"]`), nil},
		{"requirement kubernetes.io subdomain", `CEL test "should allow kubernetes subdomains exceptions"`,
			requirementAt1("subdomain.kubernetes.io/test", "In", `["test"]`), nil},
		{"requirement node-role subdomain", `CEL test "should allow kubernetes subdomains exceptions"`,
			requirementAt1("node-role.kubernetes.io/worker", "Exists", "[]"), nil},
		{"requirement beta arch twin", "runtime: NormalizedLabels beta.kubernetes.io/arch -> kubernetes.io/arch (well known)",
			requirementAt1("beta.kubernetes.io/arch", "In", `["amd64"]`), nil},
		{"requirement beta instance-type twin", "runtime: NormalizedLabels beta.kubernetes.io/instance-type -> node.kubernetes.io/instance-type",
			requirementAt1("beta.kubernetes.io/instance-type", "In", `["m5.large"]`), nil},
		{"requirement failure-domain zone twin", "runtime: NormalizedLabels failure-domain.beta.kubernetes.io/zone -> topology.kubernetes.io/zone",
			requirementAt1("failure-domain.beta.kubernetes.io/zone", "In", `["us-east-1a"]`), nil},
		{"requirement windows-build", "runtime: core WellKnownLabels",
			requirementAt1("node.kubernetes.io/windows-build", "In", `["10.0.20348"]`), nil},
		{"requirement hostname", `CRD key rule "label \"kubernetes.io/hostname\" is restricted"`,
			requirementAt1("kubernetes.io/hostname", "In", `["a"]`),
			[]string{req + `label "kubernetes.io/hostname" is restricted`}},
		{"requirement nodepool", `CRD key rules; CEL test "should fail for the karpenter.sh/nodepool label"`,
			requirementAt1("karpenter.sh/nodepool", "In", `["a"]`),
			[]string{req + `label "karpenter.sh/nodepool" is restricted`}},
		{"requirement karpenter.sh domain", `CRD key rule "label domain \"karpenter.sh\" is restricted"`,
			requirementAt1("karpenter.sh/team", "In", `["a"]`),
			[]string{req + `label domain "karpenter.sh" is restricted`}},
		{"requirement karpenter.sh subdomain", `CRD key rule: the prefix endsWith("karpenter.sh")`,
			requirementAt1("sub.karpenter.sh/team", "In", `["a"]`),
			[]string{req + `label domain "karpenter.sh" is restricted`}},
		{"requirement unknown aws label", `CRD key rule "label domain \"karpenter.k8s.aws\" is restricted"`,
			requirementAt1("karpenter.k8s.aws/instance-colour", "In", `["a"]`),
			[]string{req + `label domain "karpenter.k8s.aws" is restricted`}},
		{"requirement ec2nodeclass", "CRD allows it, runtime IsRestrictedLabel does not: not in WellKnownLabels",
			requirementAt1("karpenter.k8s.aws/ec2nodeclass", "In", `["default"]`),
			[]string{req + "using label karpenter.k8s.aws/ec2nodeclass" + runtimeMsg}},
		{"requirement tenancy value unknown", "runtime: validateWellKnownValues (provider: dedicated, default)",
			requirementAt1("karpenter.k8s.aws/instance-tenancy", "In", `["host"]`),
			[]string{`nodepools/default.yaml:17: spec.template.spec.requirements[1].values: no valid values found in ["host"] for karpenter.k8s.aws/instance-tenancy, expected one of: dedicated, default`}},
		{"requirement capacity-type values unknown", "runtime: validateWellKnownValues (core: on-demand, reserved, spot)",
			edit(pool, `values: ["spot"]`, `values: ["ondemand"]`),
			[]string{`nodepools/default.yaml:14: spec.template.spec.requirements[0].values: no valid values found in ["ondemand"] for karpenter.sh/capacity-type, expected one of: on-demand, reserved, spot`}},
		{"requirement capacity-type minValues over valid values", "runtime: validateWellKnownValues minValues",
			edit(pool, `values: ["spot"]`, `values: ["spot", "ondemand"]`+"\n          minValues: 2"),
			[]string{`nodepools/default.yaml:14: spec.template.spec.requirements[0].values: not enough valid values found in ["spot", "ondemand"] for karpenter.sh/capacity-type, expected at least 2 valid values from: on-demand, reserved, spot, got: 1`}},

		// Template labels.
		{"label kubernetes.io domain", `CEL test "should allow labels prefixed with the kubernetes domain"`,
			templateLabel("kubernetes.io/key"), nil},
		{"label k8s.io subdomain", `CEL test "should allow subdomain labels prefixed with the kubernetes domain"`,
			templateLabel("subdomain.k8s.io/key"), nil},
		{"label kops", `CEL test "should allow labels kOps require"`, templateLabel("kops.k8s.io/instancegroup"), nil},
		{"label capacity-type", "CRD labels rule list; runtime: core WellKnownLabels", templateLabel("karpenter.sh/capacity-type"), nil},
		{"label instance-tenancy", "CRD labels rule list; runtime: provider WellKnownLabels",
			templateLabel("karpenter.k8s.aws/instance-tenancy"), nil},
		{"label hostname", `CRD labels rule "label \"kubernetes.io/hostname\" is restricted"`,
			templateLabel("kubernetes.io/hostname"), []string{lbl("kubernetes.io/hostname") + `label "kubernetes.io/hostname" is restricted`}},
		{"label karpenter.sh domain", `CEL test "should fail for restricted label domains"`,
			templateLabel("karpenter.sh/unknown"), []string{lbl("karpenter.sh/unknown") + `label domain "karpenter.sh" is restricted`}},
		{"label karpenter.k8s.aws domain", `CEL test "should fail for restricted label domains" (provider domain)`,
			templateLabel("karpenter.k8s.aws/unknown"), []string{lbl("karpenter.k8s.aws/unknown") + `label domain "karpenter.k8s.aws" is restricted`}},
		{"label ec2nodeclass", "CRD allows it, runtime validateLabels/IsRestrictedLabel does not",
			templateLabel("karpenter.k8s.aws/ec2nodeclass"),
			[]string{lbl("karpenter.k8s.aws/ec2nodeclass") + "using label karpenter.k8s.aws/ec2nodeclass" + runtimeMsg}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadData(testFile, []byte(tc.doc+"---\n"+class))
			var got []string
			var list ErrorList
			if errors.As(err, &list) {
				for _, e := range list {
					got = append(got, e.Error())
				}
			} else if err != nil {
				t.Fatalf("want an ErrorList or nil, got %v", err)
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("source: %s\ngot:\n%s\nwant:\n%s", tc.source, strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
