// Package browsertest renders the HTML pages nodewright writes (`simulate
// -o html`, `report -o html`) in a real headless Chromium, for tests: find
// the browser, dump a page's DOM, take a screenshot and count its colours.
// Tests skip when no browser is installed (make test does not need one).
package browsertest

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Browser finds a Chromium, or skips t when none is on PATH.
func Browser(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no chromium, chromium-browser or google-chrome on PATH")
	return ""
}

// Page is a page written to a directory of its own, with the browser.
type Page struct {
	t       testing.TB
	browser string
	dir     string
	path    string
}

// Open writes html to a temporary file for browser to render.
func Open(t testing.TB, browser string, html []byte) *Page {
	t.Helper()
	dir := t.TempDir()
	p := &Page{t: t, browser: browser, dir: dir, path: filepath.Join(dir, "page.html")}
	if err := os.WriteFile(p.path, html, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// DOM is the page's DOM as Chromium built it.
func (p *Page) DOM() []byte {
	return p.run("--dump-dom", "file://"+p.path)
}

// Colours takes a screenshot of width x height pixels and counts its
// pixels by colour ("#rrggbb").
func (p *Page) Colours(width, height int) map[string]int {
	p.t.Helper()
	shot := filepath.Join(p.dir, "page.png")
	p.run("--screenshot="+shot, fmt.Sprintf("--window-size=%d,%d", width, height), "file://"+p.path)
	f, err := os.Open(shot)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		p.t.Fatalf("screenshot: %v", err)
	}
	counts := map[string]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			counts[fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, bl>>8)]++
		}
	}
	return counts
}

// run runs the headless browser with a profile of its own and returns its
// stdout.
func (p *Page) run(args ...string) []byte {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--user-data-dir=" + filepath.Join(p.dir, "profile")}
	cmd := exec.CommandContext(ctx, p.browser, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		p.t.Fatalf("%s %v: %v\n%s", p.browser, args, err, errb.String())
	}
	return out.Bytes()
}
