package metrics

import (
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// EMF allows 30 dimensions a directive; cluster and function are on every line.
const maxOwnDimensions = 30 - 2

func TestEveryNameIsDefinedOnce(t *testing.T) {
	defined := map[string]Definition{}
	for _, d := range Definitions() {
		if _, dup := defined[d.Name]; dup {
			t.Errorf("%s defined twice", d.Name)
		}
		defined[d.Name] = d
		if !strings.HasPrefix(d.Name, KarpenterPrefix) && !strings.HasPrefix(d.Name, NodewrightPrefix) {
			t.Errorf("%s: want a karpenter_ or nodewright_ prefix", d.Name)
		}
		if strings.HasPrefix(d.Name, KarpenterPrefix) && d.Karpenter != "" {
			t.Errorf("%s has Karpenter's name; Karpenter is for differing names", d.Name)
		}
		if (d.Kind == Counter) != strings.HasSuffix(d.Name, "_total") {
			t.Errorf("%s: counters, and only they, end in _total", d.Name)
		}
		if d.Help == "" || d.Unit == "" || len(d.Dimensions) > maxOwnDimensions {
			t.Errorf("%s: incomplete definition %+v", d.Name, d)
		}
	}
	// Every name constant of names.go has its definition.
	f, err := parser.ParseFile(token.NewFileSet(), "names.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := 0
	for _, decl := range f.Decls {
		if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, spec := range g.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					lit, ok := v.(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					name, _ := strconv.Unquote(lit.Value)
					if strings.HasPrefix(name, KarpenterPrefix) || strings.HasPrefix(name, NodewrightPrefix) {
						consts++
						if _, ok := defined[name]; !ok {
							t.Errorf("%s has no Definition", name)
						}
					}
				}
			}
		}
	}
	if consts != len(defined) {
		t.Errorf("%d name constants, %d definitions", consts, len(defined))
	}
}

func TestReferenceTableListsEveryMetric(t *testing.T) {
	table := ReferenceTable()
	for _, d := range Definitions() {
		if !strings.Contains(table, "| `"+d.Name+"` |") {
			t.Errorf("table lacks %s", d.Name)
		}
	}
	if !strings.Contains(table, "| `"+SchedulingDuration+"` | histogram | Seconds | — | same name |") {
		t.Errorf("table row for %s:\n%s", SchedulingDuration, table)
	}
}
