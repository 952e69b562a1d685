package karpenterawsdiff

import (
	"context"
	"maps"
	"os"
	"slices"
	"testing"
)

// TestDumpCase prints both sides' normalized fields of the one case that
// KARPENTER_AWS_DIFF_DUMP names (as the differential test's report names
// cases), for looking into a difference.
func TestDumpCase(t *testing.T) {
	want := os.Getenv("KARPENTER_AWS_DIFF_DUMP")
	if want == "" {
		t.Skip("set KARPENTER_AWS_DIFF_DUMP to a case name")
	}
	dir, err := KarpenterExamplesDir()
	if err != nil {
		t.Fatal(err)
	}
	classes, err := LoadCorpus("../../../infra/examples", dir, "testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range Cases(classes) {
		if c.Name() != want {
			continue
		}
		r, err := Run(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		karp, nw, err := Sides(c, r)
		if err != nil {
			t.Fatal(err)
		}
		for side, f := range map[string]Flat{"karpenter": karp, "nodewright": nw} {
			for _, p := range slices.Sorted(maps.Keys(f)) {
				t.Logf("%s %s = %s", side, p, f[p])
			}
		}
		return
	}
	t.Fatalf("no case %q", want)
}
