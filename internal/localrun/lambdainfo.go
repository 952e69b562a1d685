package localrun

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// describe is one line of the stack's settings per function, for the
// timeline: e.g. "disruption: timeout 5m0s, reserved 1, async retries 2 age
// 6h0m0s (Lambda's defaults), DisruptionQueue batch 10 max concurrency -".
func describe(fns map[string]*lambdaFunction) string {
	var parts []string
	for _, name := range controllers {
		f := fns[name]
		reserved := "unreserved"
		if n := f.spec.ReservedConcurrency; n > 0 {
			reserved = fmt.Sprintf("reserved %d", n)
		}
		async := fmt.Sprintf("async retries %d age %s", f.spec.Async.MaxRetries, f.spec.Async.MaxEventAge)
		if !f.spec.Async.Configured {
			async += " (Lambda's defaults)"
		}
		s := fmt.Sprintf("%s: timeout %s, %s, %s", name, f.timeout, reserved, async)
		for _, src := range f.spec.Sources {
			maxc := "-"
			if src.MaxConcurrency > 0 {
				maxc = strconv.Itoa(src.MaxConcurrency)
			}
			s += fmt.Sprintf(", %s batch %d max concurrency %s visibility %s receives %d", src.Queue.Construct, src.BatchSize, maxc,
				src.Queue.VisibilityTimeout, src.Queue.MaxReceiveCount)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

var rateExpr = regexp.MustCompile(`^rate\(([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\)$`)

// schedulePeriod is the local period of a schedule rule's expression:
// tick stands for the stack's minute, so rate(5 minutes) ticks every
// 5*tick. Only rate expressions are supported.
func schedulePeriod(expr string, tick time.Duration) (time.Duration, error) {
	m := rateExpr.FindStringSubmatch(expr)
	if m == nil {
		return 0, fmt.Errorf("schedule %q: the local run supports rate(N minutes|hours|days) only", expr)
	}
	n, _ := strconv.Atoi(m[1])
	unit := map[string]int{"minute": 1, "minutes": 1, "hour": 60, "hours": 60, "day": 1440, "days": 1440}[m[2]]
	return time.Duration(n*unit) * tick, nil
}
