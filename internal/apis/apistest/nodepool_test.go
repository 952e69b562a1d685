package apistest_test

import (
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
)

// Every field the builder writes must load with the real loader, pass
// validation, and come back as given.
func TestPoolAndNodeClassLoad(t *testing.T) {
	pool := apistest.Pool{
		Name:      "web",
		NodeClass: "web-class",
		Labels:    map[string]string{"team": "web", "example.com/tier": "front"},
		Requirements: []apistest.Req{
			apistest.In("node.kubernetes.io/instance-type", "m5.large", "m5.xlarge"),
			{Key: "karpenter.k8s.aws/instance-generation", Op: "Gt", Values: []string{"5"}},
			{Key: "example.com/gpu", Op: "DoesNotExist"},
		},
		Taints:                 []apistest.Taint{{Key: "dedicated", Value: "web", Effect: "NoSchedule"}, {Key: "spotty", Effect: "PreferNoSchedule"}},
		StartupTaints:          []apistest.Taint{{Key: "example.com/agent", Effect: "NoSchedule"}},
		ExpireAfter:            "24h",
		TerminationGracePeriod: "1h",
		ConsolidationPolicy:    "WhenEmpty",
		ConsolidateAfter:       "30s",
		Budgets:                []apistest.Budget{{Nodes: "100%"}, {Nodes: "0", Schedule: "0 12 * * *", Duration: "1h", Reasons: []string{"Drifted"}}},
		Limits:                 map[string]string{"cpu": "4", "memory": "16Gi"},
		Weight:                 10,
	}
	class := apistest.NodeClass{Name: "web-class", AMIAlias: "bottlerocket@latest", Role: "KarpenterNodeRole-demo", Discovery: "demo"}
	cfg := apistest.Load(t, apistest.Doc(pool.YAML(), class.YAML()))
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	np, nc := cfg.NodePool("web"), cfg.NodeClass("web-class")
	if np == nil || nc == nil || cfg.NodeClassFor(np) != nc {
		t.Fatalf("loaded %d pools, %d classes; want web -> web-class", len(cfg.NodePools), len(cfg.NodeClasses))
	}
	if err := np.Validate(); err != nil {
		t.Errorf("pool: %v", err)
	}
	if err := nc.Validate(); err != nil {
		t.Errorf("class: %v", err)
	}
	spec := np.Spec.Template.Spec
	if got := np.Spec.Template.ObjectMeta.Labels; len(got) != 2 || got["team"] != "web" || got["example.com/tier"] != "front" {
		t.Errorf("labels %v", got)
	}
	if len(spec.Requirements) != 3 || spec.Requirements[0].Values[1] != "m5.xlarge" || spec.Requirements[1].Operator != "Gt" ||
		spec.Requirements[2].Operator != "DoesNotExist" || spec.Requirements[2].Values != nil {
		t.Errorf("requirements %+v", spec.Requirements)
	}
	if len(spec.Taints) != 2 || spec.Taints[0].Value != "web" || spec.Taints[1].Value != "" || spec.Taints[1].Effect != "PreferNoSchedule" {
		t.Errorf("taints %+v", spec.Taints)
	}
	if len(spec.StartupTaints) != 1 || spec.StartupTaints[0].Key != "example.com/agent" || spec.StartupTaints[0].Effect != "NoSchedule" {
		t.Errorf("startupTaints %+v", spec.StartupTaints)
	}
	if d, ok := spec.ExpireAfter.Get(); !ok || d != 24*time.Hour {
		t.Errorf("expireAfter %v", spec.ExpireAfter)
	}
	if g := spec.TerminationGracePeriod; g == nil || g.Duration != time.Hour {
		t.Errorf("terminationGracePeriod %v", g)
	}
	dis := np.Spec.Disruption
	if d, ok := dis.ConsolidateAfter.Get(); dis.ConsolidationPolicy != apis.ConsolidationPolicyWhenEmpty || !ok || d != 30*time.Second {
		t.Errorf("disruption %+v", dis)
	}
	if len(dis.Budgets) != 2 || dis.Budgets[0].Nodes != "100%" || dis.Budgets[1].Schedule == nil || *dis.Budgets[1].Schedule != "0 12 * * *" ||
		len(dis.Budgets[1].Reasons) != 1 || dis.Budgets[1].Reasons[0] != apis.DisruptionReasonDrifted {
		t.Errorf("budgets %+v", dis.Budgets)
	}
	if cpu, mem := np.Spec.Limits["cpu"], np.Spec.Limits["memory"]; cpu.String() != "4" || mem.String() != "16Gi" {
		t.Errorf("limits %v", np.Spec.Limits)
	}
	if np.Spec.Weight == nil || *np.Spec.Weight != 10 {
		t.Errorf("weight %v", np.Spec.Weight)
	}
	if nc.AMIAlias() != "bottlerocket@latest" || nc.Spec.Role != "KarpenterNodeRole-demo" ||
		nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != "demo" ||
		nc.Spec.SecurityGroupSelectorTerms[0].Tags["karpenter.sh/discovery"] != "demo" {
		t.Errorf("class %+v", nc.Spec)
	}
}

// The zero Pool and NodeClass are a valid pair named "default", with
// Karpenter's defaults for all that is left out.
func TestZeroValuesLoad(t *testing.T) {
	cfg := apistest.Load(t, apistest.Doc(apistest.Pool{}.YAML(), apistest.NodeClass{}.YAML()))
	np := cfg.NodePool("default")
	if np == nil || cfg.NodeClassFor(np) == nil {
		t.Fatalf("want the pool default on the class default, got %+v", cfg)
	}
	if np.Spec.Disruption.ConsolidationPolicy != apis.ConsolidationPolicyWhenEmptyOrUnderutilized || len(np.Spec.Limits) != 0 || np.Spec.Weight != nil {
		t.Errorf("defaults: %+v", np.Spec)
	}
}

func TestDoc(t *testing.T) {
	if got, want := apistest.Doc("a: 1\n", "b: 2"), "a: 1\n---\nb: 2\n"; got != want {
		t.Errorf("Doc = %q, want %q", got, want)
	}
}
