package disruption

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis"
)

func (f *fixture) makeStatic(replicas int64) { f.cfg.NodePool("default").Spec.Replicas = &replicas }

// A static pool's empty, consolidatable-looking nodes are left alone: no
// emptiness, no consolidation (Karpenter ignores consolidationPolicy when
// replicas is set).
func TestStaticPoolIsNotConsolidated(t *testing.T) {
	f := newFixture(t, fixOpt{})
	f.node("a", "m5.large")
	f.node("b", "m5.xlarge")
	f.pod("web", "b", "100m", "128Mi")
	if d := f.decide(); d.Command == nil {
		t.Fatal("the dynamic pool's nodes should be consolidated (the fixture is wrong)")
	}
	f.makeStatic(2)
	d := f.decide()
	if d.Command != nil || d.Eligible[MethodEmptiness] != 0 || d.Eligible[MethodSingleNode] != 0 {
		t.Fatalf("static pool: command %s, eligible %v", fmtCmd(d.Command), d.Eligible)
	}
}

// A drifted static node is replaced by a node of its own pool planned from
// the template, not by wherever its pods would fit; validation agrees.
func TestStaticDriftReplacesFromThePool(t *testing.T) {
	f := newFixture(t, fixOpt{})
	_, old := f.node("old", "m5.xlarge")
	f.node("ok", "m5.xlarge")
	f.pod("web", "old", "100m", "128Mi")
	f.makeStatic(2)
	f.drift[old.Name] = "AMIDrift"
	d := f.decide()
	cmd := d.Command
	if cmd == nil || cmd.Method != MethodDrift || cmd.Action() != ActionReplace || len(cmd.Candidates) != 1 || cmd.Candidates[0].Claim != old.Name ||
		len(cmd.Replacements) != 1 || cmd.Replacements[0].NodePool != "default" {
		t.Fatalf("static drift: %s (eligible %v, findings %v)", fmtCmd(cmd), d.Eligible, d.Findings)
	}
	if ok, why, err := Validate(ctx, f.view(), cmd); err != nil || !ok {
		t.Fatalf("validate: %v %s %v", ok, why, err)
	}
}

// Drift waits while the pool has a surplus to remove, and a replacement
// must fit under limits.nodes.
func TestStaticDriftWaitsForScaleDownAndLimit(t *testing.T) {
	f := newFixture(t, fixOpt{})
	_, old := f.node("old", "m5.xlarge")
	f.node("ok", "m5.xlarge")
	f.drift[old.Name] = "AMIDrift"
	f.makeStatic(1)
	if d := f.decide(); d.Command != nil {
		t.Fatalf("surplus: %s", fmtCmd(d.Command))
	}
	f.makeStatic(2)
	f.cfg.NodePool("default").Spec.Limits = apis.Limits{"nodes": resource.MustParse("2")}
	if d := f.decide(); d.Command != nil {
		t.Fatalf("at limits.nodes: %s", fmtCmd(d.Command))
	}
	f.cfg.NodePool("default").Spec.Limits = apis.Limits{"nodes": resource.MustParse("3")}
	if d := f.decide(); d.Command == nil {
		t.Fatal("room for one replacement: no command")
	}
}
