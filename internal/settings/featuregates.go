package settings

import (
	"fmt"
	"strconv"
	"strings"
)

// EnvFeatureGates holds Karpenter-style feature gates, "Name=true,Name=false"
// (Karpenter's FEATURE_GATES setting, by the same gate names), so a
// Karpenter user's habits carry over.
const EnvFeatureGates = "NODEWRIGHT_FEATURE_GATES"

// FeatureGates turn on behaviour that is off by default, as in Karpenter.
type FeatureGates struct {
	// SpotToSpotConsolidation lets consolidation replace spot nodes with
	// cheaper spot nodes. Off by default, as in Karpenter: replacing spot by
	// spot chases the lowest price and tends to land on the pools most
	// likely to be interrupted.
	SpotToSpotConsolidation bool
	// NodeRepair replaces nodes unhealthy for longer than their condition's
	// toleration (Karpenter's gate of that name, off by default).
	NodeRepair bool
}

// gateNames are the gates nodewright implements. Karpenter gates that it
// does not implement yet are refused by name rather than silently ignored.
var gateNames = []string{"NodeRepair", "SpotToSpotConsolidation"}

// ParseFeatureGates reads a NODEWRIGHT_FEATURE_GATES value.
func ParseFeatureGates(v string) (FeatureGates, error) {
	var g FeatureGates
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		on, err := strconv.ParseBool(strings.TrimSpace(val))
		if !ok || err != nil {
			return g, fmt.Errorf("%s: %q: want Name=true or Name=false", EnvFeatureGates, item)
		}
		switch name = strings.TrimSpace(name); name {
		case "SpotToSpotConsolidation":
			g.SpotToSpotConsolidation = on
		case "NodeRepair":
			g.NodeRepair = on
		default:
			return g, fmt.Errorf("%s: unknown or unsupported feature gate %q (nodewright supports %s)",
				EnvFeatureGates, name, strings.Join(gateNames, ", "))
		}
	}
	return g, nil
}

// String renders the gates as the environment variable's value.
func (g FeatureGates) String() string {
	return "NodeRepair=" + strconv.FormatBool(g.NodeRepair) + ",SpotToSpotConsolidation=" + strconv.FormatBool(g.SpotToSpotConsolidation)
}
