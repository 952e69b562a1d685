package functions_test

import (
	"bufio"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/nodewright/nodewright/"

// layoutRow is one row of the Layout table of CONTRIBUTING.md: a package (or, with
// "/...", a tree) and the project packages its non-test code may import.
type layoutRow struct {
	dir     string
	tree    bool
	allowed []string
}

// The Layout table (CONTRIBUTING.md) is the map a newcomer reads; this test keeps
// it true: every package has a row, and no package imports a project
// package its row does not allow (tests may import more: fixtures, fakes).
func TestLayoutTableMatchesTheCode(t *testing.T) {
	rows := readLayout(t, "../CONTRIBUTING.md")
	for _, dir := range packageDirs(t, "..") {
		row := rowFor(rows, dir)
		if row == nil {
			t.Errorf("%s has no row in the Layout table of CONTRIBUTING.md", dir)
			continue
		}
		for _, imp := range projectImports(t, filepath.Join("..", dir)) {
			if !row.allows(imp) {
				t.Errorf("%s imports %s, which its Layout row (%s) does not allow", dir, imp, row.dir)
			}
		}
	}
}

func readLayout(t *testing.T, readme string) []layoutRow {
	t.Helper()
	f, err := os.Open(readme)
	if err != nil {
		t.Fatalf("read the layout table: %v", err)
	}
	defer f.Close()
	var rows []layoutRow
	in := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Layout"
			continue
		}
		cells := strings.Split(line, "|")
		if !in || len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		dir := strings.Trim(strings.TrimSpace(cells[1]), "`")
		row := layoutRow{dir: strings.TrimSuffix(dir, "/..."), tree: strings.HasSuffix(dir, "/...")}
		for _, a := range strings.Split(cells[3], ",") {
			if a = strings.TrimSpace(a); a != "" && a != "—" {
				row.allowed = append(row.allowed, a)
			}
		}
		rows = append(rows, row)
	}
	if len(rows) < 20 {
		t.Fatalf("found %d rows in the Layout table of CONTRIBUTING.md; is the table still there?", len(rows))
	}
	return rows
}

// rowFor is the row of dir: its own, else the nearest row above it (a
// package's subpackages without a row of their own belong to it).
func rowFor(rows []layoutRow, dir string) *layoutRow {
	var best *layoutRow
	for i, r := range rows {
		if (dir == r.dir || strings.HasPrefix(dir, r.dir+"/")) && (best == nil || len(r.dir) > len(best.dir)) {
			best = &rows[i]
		}
	}
	return best
}

// allows reports whether the row's code may import imp, a path relative to
// the module with "internal/" dropped. A package may always import inside
// its own tree.
func (r *layoutRow) allows(imp string) bool {
	own := strings.TrimPrefix(r.dir, "internal/")
	if imp == own || strings.HasPrefix(imp, own+"/") {
		return true
	}
	return slices.Contains(r.allowed, imp)
}

// packageDirs are the module's directories holding non-test Go files
// (separate modules, testdata and npm trees excluded).
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "cdk.out" || name == "dist") {
			return filepath.SkipDir
		}
		if d.IsDir() && path != root {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // another module (karpentercompare, tools/lint)
			}
		}
		if !d.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			seen[filepath.ToSlash(rel)] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the module: %v", err)
	}
	dirs := make([]string, 0, len(seen))
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}

// projectImports are the project packages dir's non-test files import,
// relative to the module with "internal/" dropped.
func projectImports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, is := range src.Imports {
			p, _ := strconv.Unquote(is.Path.Value)
			if rel, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out, strings.TrimPrefix(rel, "internal/")) {
				out = append(out, strings.TrimPrefix(rel, "internal/"))
			}
		}
	}
	return out
}

// maxFileLines bounds a Go file (tests included; generated files aside): a
// file longer than this holds more than one concern and splits by concern.
// Function length is bounded by the lint gate (funlen in .golangci.yaml).
const maxFileLines = 600

func TestNoGoFileIsLongerThanTheBound(t *testing.T) {
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "cdk.out") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if n := strings.Count(string(src), "\n"); n > maxFileLines && !strings.Contains(string(src), "Code generated") {
			t.Errorf("%s has %d lines (bound %d): split it by concern", path, n, maxFileLines)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
