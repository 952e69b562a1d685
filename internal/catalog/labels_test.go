package catalog

import "testing"

// Offering- and NodePool-level keys are well known but not type level;
// every type-level key is well known.
func TestWellKnownLabelsExtendTypeLevel(t *testing.T) {
	extra := []string{LabelTopologyZone, LabelTopologyZoneID, LabelCapacityType, LabelNodePool}
	if got, want := len(WellKnownLabels), len(TypeLevelLabels)+len(extra); got != want || want != 28 {
		t.Fatalf("%d well-known keys, want %d (28)", got, want)
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
