package catalog

import (
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
)

// The controller's settings reach every allocatable a catalog computes, and
// a catalog derived from it (ForNodeClass, WithUnavailable, Filter) keeps
// them: the planner, the claim records and the launch template must agree.
func TestControllerAllocatableReachesEveryDerivedCatalog(t *testing.T) {
	base, err := Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	zero := 0.0
	cat := base.WithControllerAllocatable(ControllerAllocatable{VMMemoryOverheadPercent: &zero, ReservedENIs: 1})
	nc := &apis.EC2NodeClass{}
	nc.Name = "default"
	derived := map[string]*Catalog{
		"itself":          cat,
		"ForNodeClass":    cat.ForNodeClass("default"),
		"WithUnavailable": cat.WithUnavailable(func(string, string, string) bool { return false }),
		"Filter":          cat.Filter(func(*InstanceType) bool { return true }),
	}
	for name, c := range derived {
		o := c.OptionsFor(nc)
		if o.VMMemoryOverheadPercent == nil || *o.VMMemoryOverheadPercent != 0 || o.ReservedENIs != 1 {
			t.Errorf("%s: options %+v lost the controller's settings", name, o)
		}
	}
	// m5.large: 29 ENI-limited pods, 20 with one ENI reserved
	// (TestAllocatableOverrides' figures).
	m5, ok := cat.Get("m5.large")
	if !ok {
		t.Fatal("no m5.large")
	}
	if got := m5.MaxPods(cat.OptionsFor(nc)); got != 20 {
		t.Errorf("max pods %d with one reserved ENI, want 20", got)
	}
	if got := m5.MaxPods(base.OptionsFor(nc)); got != 29 {
		t.Errorf("max pods %d without settings, want Karpenter's default 29", got)
	}
}
