package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nodewright/nodewright/internal/inspect"
)

// claimWatch is `get nodeclaims --watch`. nodewright keeps its claims in
// DynamoDB, which has no watch, so it polls: the first poll prints the
// listing, each later one prints the claims that were added, changed or
// deleted (as their tombstone) since, as kubectl -w prints watch events.
type claimWatch struct {
	out, errOut io.Writer
	print       inspect.PrintOptions
	prices      inspect.Prices
	// deleted lists the tombstones present at the start too (--deleted);
	// claims deleted during the watch are always printed.
	deleted bool
	now     func() time.Time
	// seen holds a fingerprint of each claim as last printed (or, for a
	// tombstone left out of the listing, as first seen).
	seen    map[string]string
	printed int
	// widths are the table's column widths so far.
	widths []int
}

// run polls with load every interval until ctx ends (Ctrl-C), which is not
// an error.
func (w *claimWatch) run(ctx context.Context, load func(context.Context) ([]inspect.Claim, error), interval time.Duration) error {
	w.seen = map[string]string{}
	for first := true; ; first = false {
		claims, err := load(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		changed := w.changes(claims, first)
		if first && len(changed) == 0 {
			fmt.Fprintln(w.errOut, "No nodeclaims found; watching for new ones.")
		}
		if err := w.emit(changed); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(interval):
		}
	}
}

// changes returns the claims to print, by name, and remembers them.
func (w *claimWatch) changes(claims []inspect.Claim, first bool) []inspect.Claim {
	current := map[string]inspect.Claim{}
	for _, c := range claims {
		// A live claim wins over a tombstone of the same name.
		if prev, ok := current[c.Name]; !ok || prev.Tombstoned() {
			current[c.Name] = c
		}
	}
	var out []inspect.Claim
	for _, name := range slices.Sorted(maps.Keys(current)) {
		c := current[name]
		fp := fingerprint(c)
		if old, ok := w.seen[name]; ok && old == fp {
			continue
		}
		w.seen[name] = fp
		if first && c.Tombstoned() && !w.deleted {
			continue
		}
		out = append(out, c)
	}
	for name := range w.seen {
		if _, ok := current[name]; !ok {
			delete(w.seen, name) // gone without a tombstone, or no longer selected
		}
	}
	return out
}

// fingerprint identifies a claim's state: any change to the record (a
// condition, a label, its deletion) is an event, as in a Kubernetes watch.
func fingerprint(c inspect.Claim) string {
	data, err := json.Marshal(inspect.NodeClaimObject(c))
	if err != nil {
		return fmt.Sprintf("%s: %v", c.Name, err)
	}
	return string(data)
}

// emit prints claims in the watch's format: table rows (the header once),
// names, or one JSON/YAML object each (YAML documents separated by ---).
func (w *claimWatch) emit(claims []inspect.Claim) error {
	if len(claims) == 0 {
		return nil
	}
	defer func() { w.printed += len(claims) }()
	switch w.print.Output {
	case inspect.OutputJSON, inspect.OutputYAML:
		for i, c := range claims {
			if w.print.Output == inspect.OutputYAML && w.printed+i > 0 {
				fmt.Fprintln(w.out, "---")
			}
			if err := inspect.WriteObject(w.out, w.print.Output, inspect.NodeClaimObject(c)); err != nil {
				return err
			}
		}
		return nil
	case inspect.OutputName:
		return inspect.WriteNodeClaims(w.out, claims, w.print, w.prices, w.now())
	}
	var rows [][]string
	if w.printed == 0 && !w.print.NoHeaders {
		rows = append(rows, inspect.NodeClaimHeader(w.print.Output))
	}
	for _, c := range claims {
		rows = append(rows, inspect.NodeClaimRow(c, w.print.Output, w.prices, w.now()))
	}
	return w.writeRows(rows)
}

// writeRows aligns rows as inspect's tables do (columns at least 6 wide, 3
// spaces apart), keeping each column as wide as it has been so far, so that
// the rows of later polls line up under the first listing.
func (w *claimWatch) writeRows(rows [][]string) error {
	for _, r := range rows {
		for i, cell := range r {
			if i == len(w.widths) {
				w.widths = append(w.widths, 0)
			}
			w.widths[i] = max(w.widths[i], 6, utf8.RuneCountInString(cell)+3)
		}
	}
	var b strings.Builder
	for _, r := range rows {
		for i, cell := range r {
			b.WriteString(cell)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", w.widths[i]-utf8.RuneCountInString(cell)))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w.out, b.String())
	return err
}
