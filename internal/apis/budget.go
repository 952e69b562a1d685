package apis

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/nodewright/nodewright/internal/apis/cron"
)

var budgetNodesPattern = regexp.MustCompile(`^((100|[0-9]{1,2})%|[0-9]+)$`)

// IsActive reports whether the budget applies at now: always when it has no
// schedule, otherwise during [activation, activation+duration) of its UTC
// cron schedule.
func (b Budget) IsActive(now time.Time) (bool, error) {
	if b.Schedule == nil {
		return true, nil
	}
	if b.Duration == nil {
		return false, fmt.Errorf("budget schedule %q has no duration", *b.Schedule)
	}
	s, err := cron.Parse(*b.Schedule)
	if err != nil {
		return false, fmt.Errorf("budget schedule %q: %w", *b.Schedule, err)
	}
	return s.Active(now, b.Duration.Duration), nil
}

// NodeLimit returns how many of total nodes the budget allows to be
// disrupted at once: "N" is N, "P%" is P% of total rounded up (as Karpenter
// does, so "10%" of 5 nodes allows 1).
func (b Budget) NodeLimit(total int) (int, error) {
	if !budgetNodesPattern.MatchString(b.Nodes) {
		return 0, fmt.Errorf("budget nodes %q is not a count or a percentage", b.Nodes)
	}
	if p, ok := strings.CutSuffix(b.Nodes, "%"); ok {
		pct, _ := strconv.Atoi(p) // the pattern guarantees 0..100
		return int(math.Ceil(float64(total) * float64(pct) / 100)), nil
	}
	n, err := strconv.Atoi(b.Nodes)
	if err != nil {
		return 0, fmt.Errorf("budget nodes %q: %w", b.Nodes, err)
	}
	return n, nil
}

// AllowedDisruptions returns the minimum NodeLimit of the budgets active at
// now that apply to reason (budgets without reasons apply to all). With no
// active budget, all total nodes may be disrupted.
func (d Disruption) AllowedDisruptions(now time.Time, reason DisruptionReason, total int) (int, error) {
	allowed := total
	for i, b := range d.Budgets {
		if len(b.Reasons) > 0 && !containsReason(b.Reasons, reason) {
			continue
		}
		active, err := b.IsActive(now)
		if err != nil {
			return 0, fmt.Errorf("budgets[%d]: %w", i, err)
		}
		if !active {
			continue
		}
		n, err := b.NodeLimit(total)
		if err != nil {
			return 0, fmt.Errorf("budgets[%d]: %w", i, err)
		}
		allowed = min(allowed, n)
	}
	return allowed, nil
}

func containsReason(rs []DisruptionReason, r DisruptionReason) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}
