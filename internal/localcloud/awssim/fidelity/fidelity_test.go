package fidelity

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// tableRow is a FIDELITY.md row: | `name` | ... | `pkg` TestName |.
var tableRow = regexp.MustCompile("^\\| `([a-z0-9-]+)` \\|.*\\| `([a-z0-9]+)` (Test\\w+) \\|$")

func TestFidelityTableListsEveryRule(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "FIDELITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][2]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if m := tableRow.FindStringSubmatch(line); m != nil {
			rows[m[1]] = [2]string{m[2], m[3]}
		}
	}
	for _, r := range Rules() {
		row, ok := rows[r.Name]
		if !ok {
			t.Errorf("rule %s is not in FIDELITY.md", r.Name)
			continue
		}
		if row[0] != filepath.Base(r.Package) || row[1] != r.Test {
			t.Errorf("rule %s: FIDELITY.md says %s %s, the code %s %s", r.Name, row[0], row[1], filepath.Base(r.Package), r.Test)
		}
		if r.Source == "" {
			t.Errorf("rule %s has no source", r.Name)
		}
		delete(rows, r.Name)
	}
	for name := range rows {
		t.Errorf("FIDELITY.md lists %s, which the code does not know", name)
	}
}

func TestRulesAreOnByDefault(t *testing.T) {
	t.Setenv(EnvRulesOff, "")
	s, err := Set{}.WithEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range Names() {
		if !s.On(n) {
			t.Errorf("rule %s is off by default", n)
		}
	}
}

func TestRulesOffByName(t *testing.T) {
	t.Setenv(EnvRulesOff, "spot-max-price, vcpu-limit")
	s, err := Set{}.WithEnv()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range Names() {
		if want := !slices.Contains([]string{SpotMaxPrice, VcpuLimit}, n); s.On(n) != want {
			t.Errorf("rule %s on = %v, want %v", n, s.On(n), want)
		}
	}
	if _, err := Off("no-such-rule"); err == nil {
		t.Error("an unknown rule name was accepted")
	}
}
