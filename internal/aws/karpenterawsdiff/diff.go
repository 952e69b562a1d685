package karpenterawsdiff

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/nodewright/nodewright/internal/wildcard"
)

// Difference is one field the two providers send differently for a case.
type Difference struct {
	Case string
	// Path is the field in the case's requests; Field the same without the
	// names of its template and override (what the table lists).
	Path, Field           string
	Karpenter, Nodewright string // Absent when one side does not send it
}

// Sides flattens a case's result: a side that failed to launch has only
// a "launch" field, saying why.
func Sides(c Case, r Result) (karp, nw Flat, err error) {
	side := func(req Requests, launchErr error) (Flat, error) {
		if launchErr != nil {
			return Flat{"launch": "failed: " + launchErr.Error()}, nil
		}
		f, err := Flatten(req, c.ClaimName())
		if err != nil {
			return nil, err
		}
		f["launch"] = "ok"
		return f, nil
	}
	if karp, err = side(r.Karpenter, r.KarpenterErr); err != nil {
		return nil, nil, fmt.Errorf("karpenter's requests: %w", err)
	}
	if nw, err = side(r.Nodewright, r.NodewrightErr); err != nil {
		return nil, nil, fmt.Errorf("nodewright's requests: %w", err)
	}
	return karp, nw, nil
}

// Diff lists the fields whose values differ, in path order. When either
// side did not launch, only that is a difference.
func Diff(caseName string, karp, nw Flat) []Difference {
	if karp["launch"] != "ok" || nw["launch"] != "ok" {
		karp, nw = Flat{"launch": karp["launch"]}, Flat{"launch": nw["launch"]}
	}
	paths := map[string]bool{}
	for p := range karp {
		paths[p] = true
	}
	for p := range nw {
		paths[p] = true
	}
	var out []Difference
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		k, kok := karp[p]
		n, nok := nw[p]
		if kok && nok && k == n {
			continue
		}
		if !kok {
			k = Absent
		}
		if !nok {
			n = Absent
		}
		out = append(out, Difference{Case: caseName, Path: p, Field: General(p), Karpenter: k, Nodewright: n})
	}
	return out
}

// Row is one listed difference: the fields it covers and, optionally,
// the values each side sends (glob patterns; none means any value), and
// why nodewright differs.
type Row struct {
	Line                          int
	Fields, Karpenter, Nodewright []string
	Why                           string
}

// Matches reports whether the row lists the difference.
func (r Row) Matches(d Difference) bool {
	return anyMatch(r.Fields, d.Field, false) && anyMatch(r.Karpenter, d.Karpenter, true) && anyMatch(r.Nodewright, d.Nodewright, true)
}

func anyMatch(patterns []string, s string, emptyMatches bool) bool {
	if len(patterns) == 0 {
		return emptyMatches
	}
	for _, p := range patterns {
		if wildcard.Match(p, s) {
			return true
		}
	}
	return false
}

// Name is how reports name the row.
func (r Row) Name() string { return fmt.Sprintf("line %d (%s)", r.Line, strings.Join(r.Fields, ", ")) }

var backticked = regexp.MustCompile("`([^`]*)`")

// ReadTable reads the listed differences: the rows of the markdown table
// whose header starts "| field |". In each cell the patterns are written
// in backticks; other text is prose.
func ReadTable(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	var rows []Row
	inTable := false
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(strings.ToLower(text), "| field |"):
			inTable = true
			continue
		case !strings.HasPrefix(text, "|"):
			inTable = false
			continue
		case !inTable || strings.HasPrefix(text, "|---") || strings.HasPrefix(text, "| ---"):
			continue
		}
		cells := splitRow(text)
		if len(cells) != 4 {
			return nil, fmt.Errorf("%s:%d: a row has 4 cells (field | Karpenter | nodewright | why), this one %d", path, line, len(cells))
		}
		r := Row{Line: line, Fields: patterns(cells[0]), Karpenter: patterns(cells[1]), Nodewright: patterns(cells[2]), Why: strings.TrimSpace(cells[3])}
		if len(r.Fields) == 0 || r.Why == "" {
			return nil, fmt.Errorf("%s:%d: a row names its fields in backticks and says why", path, line)
		}
		rows = append(rows, r)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return rows, nil
}

// splitRow splits a table row at the pipes outside backticks.
func splitRow(text string) []string {
	text = strings.TrimSuffix(strings.TrimPrefix(text, "|"), "|")
	var cells []string
	var cur strings.Builder
	code := false
	for _, c := range text {
		switch {
		case c == '`':
			code = !code
		case c == '|' && !code:
			cells = append(cells, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(c)
	}
	return append(cells, cur.String())
}

func patterns(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}
