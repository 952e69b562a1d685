package cloudtest

import (
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
)

func options(opts ...Option) envOptions {
	var o envOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// The pool options build the pool the tests used to paste: named after the
// test's pool, on a node class of the same name for the cloud's cluster,
// with the label and requirements in the order given.
func TestPoolOptions(t *testing.T) {
	o := options(PoolLabel("nodewright.io/test"), InstanceTypes("m5.large", "m5.xlarge"), CapacityTypes("spot"),
		PoolSpec(func(p *apistest.Pool) { p.ConsolidateAfter = "5s" }))
	_, cfg := o.loadPool(t, "p1", "c1")
	np := cfg.NodePool("p1")
	if np == nil {
		t.Fatalf("no pool p1 in %+v", cfg)
	}
	nc := cfg.NodeClassFor(np)
	if nc == nil || nc.Name != "p1" || nc.Spec.Role != "KarpenterNodeRole-c1" || nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != "c1" {
		t.Errorf("node class %+v", nc)
	}
	spec := np.Spec.Template.Spec
	if got := np.Spec.Template.ObjectMeta.Labels["nodewright.io/test"]; got != "p1" {
		t.Errorf("label %q", got)
	}
	if len(spec.Requirements) != 2 || spec.Requirements[0].Key != catalog.LabelInstanceType || len(spec.Requirements[0].Values) != 2 ||
		spec.Requirements[1].Key != apis.CapacityTypeLabelKey || spec.Requirements[1].Values[0] != "spot" {
		t.Errorf("requirements %+v", spec.Requirements)
	}
	if d, ok := np.Spec.Disruption.ConsolidateAfter.Get(); !ok || d.Seconds() != 5 {
		t.Errorf("consolidateAfter %v", np.Spec.Disruption.ConsolidateAfter)
	}
}

// PoolYAML replaces the built pool; NodeClass names the class it is
// loaded with.
func TestPoolYAMLAndNodeClass(t *testing.T) {
	o := options(NodeClass("default"), PoolYAML(apistest.Pool{Name: "e2e"}.YAML()), InstanceTypes("ignored"))
	_, cfg := o.loadPool(t, "p1", "c1")
	np := cfg.NodePool("e2e")
	if np == nil || cfg.NodePool("p1") != nil || len(np.Spec.Template.Spec.Requirements) != 0 {
		t.Fatalf("pools %+v", cfg.NodePools)
	}
	if nc := cfg.NodeClassFor(np); nc == nil || nc.Name != "default" {
		t.Errorf("node class %+v", nc)
	}
}

func TestNodeClassYAMLLoadsAfterAPool(t *testing.T) {
	cfg := LoadConfig(t, apistest.Pool{Name: "p", NodeClass: "k"}.YAML()+NodeClassYAML("k", "c"))
	if np := cfg.NodePool("p"); np == nil || cfg.NodeClassFor(np) == nil {
		t.Errorf("config %+v", cfg)
	}
}
