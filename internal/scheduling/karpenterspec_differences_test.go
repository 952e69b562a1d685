package scheduling_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Where nodewright differs from Karpenter on purpose, its case asserts
// nodewright's behaviour and is listed here with the reason; the same
// table is in CONTRIBUTING.md ("Karpenter's scheduling tests as the
// spec"), which TestKarpenterSpecCounts keeps in step.
var deliberateDifferences = []struct{ name, why string }{
	{"PodAntiAffinity/ZoneTopologyOnePerZone", "Karpenter leaves a new node's zone open until it exists, so zonal " +
		"self-anti-affinity places one pod per batch (three batches for three zones); nodewright pins each claim of a " +
		"zonal anti-affinity group to one zone when it plans (the claim requires it), so one pass places one pod per zone"},
	{"InstanceTypeCompatibility/DifferentOSDifferentNodes", "Karpenter's fake provider offers every type as linux and windows in one pool; on AWS the os comes from the EC2NodeClass's AMI family (the provider's computeRequirements), as in nodewright, so an AL2023 pool plans the linux pod and leaves the windows pod pending (a Windows pool serves it: TestWindowsPodPlannedOntoWindowsPool)"},
}

// knownHoles lists the ported behaviours where nodewright is wrong today:
// test name -> the hole. runSpec inverts these cases, so each still fails
// as written and the fix makes the test fail until its entry is deleted.
var knownHoles = map[string]string{}

// specTables is every table of the spec, for the counts.
func specTables() [][]specCase {
	return [][]specCase{customConstraintCases(), wellKnownLabelCases(), fallbackCases(), compatibilityCases(),
		binpackingCases(), containerResourceCases(), limitCases(), inFlightCases(), existingNodeCases(),
		zonalSpreadCases(), hostnameAndCapacityTypeCases(), spreadPolicyCases(), combinedSpreadCases(),
		podAffinityCases(), podAntiAffinityCases(), taintCases(), daemonSetCases(), nodeClaimCases(), nodePoolChoiceCases(), volumeCases(), volumeLimitCases(),
		cheapestCases(), minValuesCases(), poolFilteringCases()}
}

// The spec's counts (update with the tables; TestKarpenterSpecCounts
// checks them):
//
//	behaviours ported:      see specPorted
//	passing as Karpenter:   specPorted - specDifferent - specHoles
//	deliberately different: specDifferent
//	known holes:            specHoles
const (
	specPorted    = 302
	specDifferent = 2
	specHoles     = 0
)

func TestKarpenterSpecCounts(t *testing.T) {
	seen := map[string]bool{}
	for _, table := range specTables() {
		for _, c := range table {
			if seen[c.name] {
				t.Errorf("case %q is listed twice", c.name)
			}
			seen[c.name] = true
		}
	}
	for name := range knownHoles {
		if !seen[name] {
			t.Errorf("knownHoles names %q, which is no case", name)
		}
	}
	contributing := readContributing(t)
	for _, d := range deliberateDifferences {
		if !seen[d.name] {
			t.Errorf("deliberateDifferences names %q, which is no case", d.name)
		}
		if _, hole := knownHoles[d.name]; hole {
			t.Errorf("%q is both a difference and a hole", d.name)
		}
		if !strings.Contains(contributing, "`"+d.name+"`") {
			t.Errorf("CONTRIBUTING.md's table of deliberate differences lacks `%s`", d.name)
		}
	}
	t.Logf("Karpenter behaviours ported: %d; passing as Karpenter: %d; deliberately different: %d; known holes: %d",
		len(seen), len(seen)-len(deliberateDifferences)-len(knownHoles), len(deliberateDifferences), len(knownHoles))
	if len(seen) != specPorted || len(deliberateDifferences) != specDifferent || len(knownHoles) != specHoles {
		t.Errorf("counts changed: %d ported, %d different, %d holes; update the spec* constants", len(seen), len(deliberateDifferences), len(knownHoles))
	}
}

func readContributing(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "CONTRIBUTING.md"))
	if err != nil {
		t.Fatalf("read CONTRIBUTING.md: %v", err)
	}
	return string(b)
}
