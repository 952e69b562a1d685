package infra

import (
	"os"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/metrics"
)

const (
	metricsTableBegin = "<!-- metrics-reference:begin (generated from internal/metrics.Definitions by `NODEWRIGHT_UPDATE_METRICS_TABLE=1 go test ./infra -run MetricsReference`) -->\n"
	metricsTableEnd   = "<!-- metrics-reference:end -->"
)

// The metrics reference in infra/README.md is the registry's table: a metric
// added, renamed or redescribed in code fails here until the README follows.
func TestMetricsReferenceTableMatchesTheCode(t *testing.T) {
	raw, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	begin, end := strings.Index(doc, metricsTableBegin), strings.Index(doc, metricsTableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("infra/README.md lacks the metrics reference markers %q ... %q", metricsTableBegin, metricsTableEnd)
	}
	want := metrics.ReferenceTable()
	if got := doc[begin+len(metricsTableBegin) : end]; got != want {
		if os.Getenv("NODEWRIGHT_UPDATE_METRICS_TABLE") == "1" {
			doc = doc[:begin+len(metricsTableBegin)] + want + doc[end:]
			if err := os.WriteFile("README.md", []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("infra/README.md's metrics reference differs from internal/metrics.Definitions; regenerate it with NODEWRIGHT_UPDATE_METRICS_TABLE=1 go test ./infra -run MetricsReference\nwant:\n%s", want)
	}
}
