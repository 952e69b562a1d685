package metrics

import (
	"fmt"
	"strings"
)

// ReferenceTable renders Definitions as the Markdown table infra/README.md
// carries between its metrics-reference markers (a test keeps them equal).
func ReferenceTable() string {
	var b strings.Builder
	b.WriteString("| metric | kind | unit | dimensions | Karpenter | meaning |\n|---|---|---|---|---|---|\n")
	for _, d := range Definitions() {
		dims := "—"
		if len(d.Dimensions) > 0 {
			dims = "`" + strings.Join(d.Dimensions, "`, `") + "`"
		}
		karpenter := "same name"
		switch {
		case d.Karpenter != "":
			karpenter = "≈ `" + d.Karpenter + "`"
		case !strings.HasPrefix(d.Name, KarpenterPrefix):
			karpenter = "—"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s |\n", d.Name, d.Kind, d.Unit, dims, karpenter, d.Help)
	}
	return b.String()
}

// Name prefixes: Karpenter's for metrics that mean what Karpenter's of the
// same name mean, nodewright's for the rest.
const (
	KarpenterPrefix  = "karpenter_"
	NodewrightPrefix = "nodewright_"
)
