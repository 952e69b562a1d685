// Package cron parses the standard 5-field cron schedules (and the
// @yearly/@monthly/@weekly/@daily/@hourly descriptors) that Karpenter
// disruption budgets use, and finds their activations. Schedules are always
// evaluated in UTC, as Karpenter does.
package cron

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Schedule is a parsed cron expression. Each field is a bit set of the
// values it matches.
type Schedule struct {
	minute, hour, dom, month, dow uint64
	// domStar/dowStar record an unrestricted day field ("*" or "?"): when
	// either is unrestricted a day must match both fields, otherwise either
	// (the classic cron rule).
	domStar, dowStar bool
}

type bounds struct {
	name     string
	min, max int
	names    map[string]int
}

var (
	minuteB = bounds{name: "minute", min: 0, max: 59}
	hourB   = bounds{name: "hour", min: 0, max: 23}
	domB    = bounds{name: "day of month", min: 1, max: 31}
	monthB  = bounds{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}}
	dowB = bounds{name: "day of week", min: 0, max: 6, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}}
)

var descriptors = map[string]string{
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
	"@monthly":  "0 0 1 * *",
	"@weekly":   "0 0 * * 0",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@hourly":   "0 * * * *",
}

// Parse parses "m h dom mon dow" (lists, ranges, steps, month and weekday
// names) or one of the @ descriptors. Time zones are rejected: budgets run
// in UTC.
func Parse(spec string) (*Schedule, error) {
	s := strings.TrimSpace(spec)
	if s == "" {
		return nil, fmt.Errorf("empty schedule")
	}
	if strings.HasPrefix(s, "TZ=") || strings.HasPrefix(s, "CRON_TZ=") {
		return nil, fmt.Errorf("time zones are not supported (schedules are UTC)")
	}
	if strings.HasPrefix(s, "@") {
		expanded, ok := descriptors[s]
		if !ok {
			return nil, fmt.Errorf("unknown descriptor %q (want @yearly, @annually, @monthly, @weekly, @daily, @midnight or @hourly)", s)
		}
		s = expanded
	}
	fields := strings.Fields(s)
	if len(fields) != 5 {
		return nil, fmt.Errorf("expected 5 fields (minute hour day-of-month month day-of-week), got %d", len(fields))
	}
	var sch Schedule
	var err error
	if sch.minute, _, err = parseField(fields[0], minuteB); err != nil {
		return nil, err
	}
	if sch.hour, _, err = parseField(fields[1], hourB); err != nil {
		return nil, err
	}
	if sch.dom, sch.domStar, err = parseField(fields[2], domB); err != nil {
		return nil, err
	}
	if sch.month, _, err = parseField(fields[3], monthB); err != nil {
		return nil, err
	}
	if sch.dow, sch.dowStar, err = parseField(fields[4], dowB); err != nil {
		return nil, err
	}
	return &sch, nil
}

// parseField parses a comma-separated list of ranges; star reports an
// unrestricted field ("*", "?" or "*/1").
func parseField(field string, b bounds) (set uint64, star bool, err error) {
	for part := range strings.SplitSeq(field, ",") {
		bitsOf, isStar, err := parseRange(part, b)
		if err != nil {
			return 0, false, err
		}
		set |= bitsOf
		star = star || isStar
	}
	return set, star, nil
}

func parseRange(expr string, b bounds) (uint64, bool, error) {
	rangePart, stepPart, hasStep := strings.Cut(expr, "/")
	step := 1
	if hasStep {
		n, err := strconv.Atoi(stepPart)
		if err != nil || n <= 0 {
			return 0, false, fmt.Errorf("%s: bad step %q in %q", b.name, stepPart, expr)
		}
		step = n
	}
	var lo, hi int
	star := false
	switch rangePart {
	case "*", "?":
		lo, hi = b.min, b.max
		star = step == 1
	default:
		loS, hiS, isRange := strings.Cut(rangePart, "-")
		var err error
		if lo, err = value(loS, b); err != nil {
			return 0, false, err
		}
		switch {
		case isRange:
			if hi, err = value(hiS, b); err != nil {
				return 0, false, err
			}
		case hasStep:
			// "a/n" means from a to the end of the range every n.
			hi = b.max
		default:
			hi = lo
		}
	}
	if lo > hi {
		return 0, false, fmt.Errorf("%s: range %q starts after it ends", b.name, expr)
	}
	if step > b.max-b.min+1 && hasStep {
		return 0, false, fmt.Errorf("%s: step %d is larger than the range", b.name, step)
	}
	var set uint64
	for v := lo; v <= hi; v += step {
		set |= 1 << uint(v)
	}
	return set, star, nil
}

func value(s string, b bounds) (int, error) {
	if n, ok := b.names[strings.ToLower(s)]; ok {
		return n, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a number", b.name, s)
	}
	if n < b.min || n > b.max {
		return 0, fmt.Errorf("%s: %d is outside %d-%d", b.name, n, b.min, b.max)
	}
	return n, nil
}

func has(set uint64, v int) bool { return set&(1<<uint(v)) != 0 }

func (s *Schedule) dayMatches(t time.Time) bool {
	dom := has(s.dom, t.Day())
	dow := has(s.dow, int(t.Weekday()))
	if s.domStar || s.dowStar {
		return dom && dow
	}
	return dom || dow
}

// searchLimit bounds Next for schedules that can never fire (e.g. "0 0 30 2 *").
const searchLimit = 5 * 366 * 24 * time.Hour

// Next returns the first activation strictly after t (in UTC), or the zero
// time when the schedule never fires within five years.
func (s *Schedule) Next(t time.Time) time.Time {
	t = t.UTC().Truncate(time.Minute).Add(time.Minute)
	limit := t.Add(searchLimit)
	for t.Before(limit) {
		if !has(s.month, int(t.Month())) {
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if !s.dayMatches(t) {
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, time.UTC)
			continue
		}
		if !has(s.hour, t.Hour()) {
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour()+1, 0, 0, 0, time.UTC)
			continue
		}
		if !has(s.minute, t.Minute()) {
			t = t.Add(time.Minute)
			continue
		}
		return t
	}
	return time.Time{}
}

// Active reports whether t falls in a window [activation, activation+d) of
// the schedule.
func (s *Schedule) Active(t time.Time, d time.Duration) bool {
	if d <= 0 {
		return false
	}
	// The latest activation at or before t is active iff it is after t-d.
	next := s.Next(t.Add(-d))
	return !next.IsZero() && !next.After(t)
}
