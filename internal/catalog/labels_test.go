package catalog

import (
	"strconv"
	"strings"
	"testing"
)

// Offering- and NodePool-level keys are well known but not type level;
// every type-level key is well known.
func TestWellKnownLabelsExtendTypeLevel(t *testing.T) {
	extra := []string{LabelTopologyZone, LabelTopologyZoneID, LabelCapacityType, LabelNodePool}
	if got, want := len(WellKnownLabels), len(TypeLevelLabels)+len(extra); got != want || want != 30 {
		t.Fatalf("%d well-known keys, want %d (30)", got, want)
	}
	for k := range TypeLevelLabels {
		if !WellKnownLabels[k] {
			t.Errorf("type-level key %s is not well known", k)
		}
	}
	for _, k := range extra {
		if !WellKnownLabels[k] || TypeLevelLabels[k] {
			t.Errorf("%s: well known %v, type level %v; want true, false", k, WellKnownLabels[k], TypeLevelLabels[k])
		}
	}
}

// Every type carries karpenter.k8s.aws/instance-tenancy "default" (the
// tenancy nodewright launches) and instance-capability-flex "true" exactly
// when its family names -flex, as Karpenter-AWS v1.14.1 labels them; both
// reach the node through NodeLabels.
func TestTenancyAndCapabilityFlexLabels(t *testing.T) {
	m5 := builtinType(t, "m5.large")
	if got := m5.NodeLabels(m5.Offerings[0]); got[LabelInstanceTenancy] != "default" || got[LabelInstanceCapabilityFlex] != "false" {
		t.Errorf("m5.large node labels: tenancy %q flex %q, want default, false", got[LabelInstanceTenancy], got[LabelInstanceCapabilityFlex])
	}
	for name, want := range map[string]string{"c7i-flex.large": "true", "m7i-flex.8xlarge": "true", "c7i.large": "false", "u-6tb1.56xlarge": "false"} {
		it := &InstanceType{Name: name, Architecture: "amd64"}
		splitName(it)
		l := TypeLabels(it, "us-east-1")
		if l[LabelInstanceCapabilityFlex] != want || l[LabelInstanceTenancy] != "default" {
			t.Errorf("%s: flex %q tenancy %q, want %s, default", name, l[LabelInstanceCapabilityFlex], l[LabelInstanceTenancy], want)
		}
	}
}

// On the real data every -flex type (c7i-flex, m7i-flex, c8i-flex, ...) is
// flex and no other is.
func TestCapabilityFlexOnRealTypes(t *testing.T) {
	cat, err := LoadDir(sharedDir(t), "us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	flex := 0
	for _, it := range cat.Types {
		want := strconv.FormatBool(strings.Contains(it.Family, "-flex"))
		if it.Labels[LabelInstanceCapabilityFlex] != want {
			t.Errorf("%s: flex %q, want %s", it.Name, it.Labels[LabelInstanceCapabilityFlex], want)
		}
		if want == "true" {
			flex++
		}
	}
	if flex == 0 {
		t.Error("no flex type in the real data")
	}
}
