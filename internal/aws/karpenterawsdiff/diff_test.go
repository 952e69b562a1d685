package karpenterawsdiff

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestKarpenterAWSDifferential launches every class of the corpus with a
// spot, an on-demand and a reserved claim in every shape through
// Karpenter-AWS's own launch template and instance providers and through
// nodewright's, and fails on every field they send differently that
// DIFFERENCES.md does not list, and on every row of it no launch shows.
func TestKarpenterAWSDifferential(t *testing.T) {
	dir, err := KarpenterExamplesDir()
	if err != nil {
		t.Fatal(err)
	}
	classes, err := LoadCorpus("../../../infra/examples", dir, "testdata")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := ReadTable("DIFFERENCES.md")
	if err != nil {
		t.Fatal(err)
	}
	cases := Cases(classes)
	t.Logf("corpus: %d classes x %d claims x %d shapes = %d launches per provider",
		len(classes), ClaimCount(), ShapeCount(), len(cases))
	diffs, err := runAll(cases)
	if err != nil {
		t.Fatal(err)
	}
	used := make([]int, len(rows))
	unlisted := map[string][]Difference{}
	for _, ds := range diffs {
		for _, d := range ds {
			listed := false
			for i, row := range rows {
				if row.Matches(d) {
					used[i]++
					listed = true
				}
			}
			if !listed {
				key := d.Field + "\n  Karpenter:  " + clip(d.Karpenter) + "\n  nodewright: " + clip(d.Nodewright)
				unlisted[key] = append(unlisted[key], d)
			}
		}
	}
	var report strings.Builder
	for _, key := range slices.Sorted(maps.Keys(unlisted)) {
		ds := unlisted[key]
		fmt.Fprintf(&report, "%s\n  %d launches, e.g. %s\n", key, len(ds), ds[0].Case)
	}
	if p := os.Getenv("KARPENTER_AWS_DIFF_REPORT"); p != "" {
		_ = os.WriteFile(p, []byte(report.String()), 0o644)
	}
	if len(unlisted) > 0 {
		t.Errorf("%d differences DIFFERENCES.md does not list (fix nodewright, or list them with the reason):\n%s", len(unlisted), report.String())
	}
	for i, row := range rows {
		if used[i] == 0 {
			t.Errorf("DIFFERENCES.md %s lists a difference no launch shows any more: remove the row", row.Name())
		} else {
			t.Logf("DIFFERENCES.md %s: %d fields", row.Name(), used[i])
		}
	}
}

// runAll launches the cases, several at once (Karpenter's CreateFleet
// batcher waits 35 ms for company on every launch), and returns each
// case's differences.
func runAll(cases []Case) ([][]Difference, error) {
	out := make([][]Difference, len(cases))
	errs := make([]error, len(cases))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				c := cases[i]
				r, err := Run(context.Background(), c)
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", c.Name(), err)
					continue
				}
				karp, nw, err := Sides(c, r)
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", c.Name(), err)
					continue
				}
				out[i] = Diff(c.Name(), karp, nw)
			}
		}()
	}
	for i := range cases {
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errors.Join(errs...)
}

func clip(s string) string {
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}
