package simulation

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

// headlessBrowser finds a Chromium to render pages with, if one is
// installed (the test is optional: make test does not need a browser).
func headlessBrowser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// TestWriteHTMLInChromium renders the page in a real headless Chromium: the
// DOM it builds has both node bars, and the screenshot shows each NodePool's
// colour over the area its CPU bar should fill.
func TestWriteHTMLInChromium(t *testing.T) {
	browser := headlessBrowser()
	if browser == "" {
		t.Skip("no chromium, chromium-browser or google-chrome on PATH")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "plan.html")
	if err := os.WriteFile(page, renderFixture(t), 0o644); err != nil {
		t.Fatal(err)
	}
	dom := runBrowser(t, browser, dir, "--dump-dom", "file://"+page)
	if n := bytes.Count(dom, []byte(`class="node"`)); n != 2 || !bytes.Contains(dom, []byte("&lt;script&gt;")) {
		t.Errorf("chromium's DOM has %d node bars or lost the escaping:\n%s", n, dom)
	}
	shot := filepath.Join(dir, "plan.png")
	runBrowser(t, browser, dir, "--screenshot="+shot, "--window-size=1200,900", "file://"+page)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	// The CPU bars: default 78 % and batch 100 % of a track a few hundred
	// pixels wide and 16 high; the memory bars are translucent.
	counts := map[string]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			counts[fmt.Sprintf("#%02x%02x%02x", r>>8, g>>8, bl>>8)]++
		}
	}
	for _, colour := range []string{"#1f77b4", "#ff7f0e"} {
		if counts[colour] < 2000 {
			t.Errorf("screenshot has %d pixels of %s, want a bar's worth (>= 2000)", counts[colour], colour)
		}
	}
}

// runBrowser runs the headless browser with a profile of its own and
// returns its stdout.
func runBrowser(t *testing.T, browser, dir string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--user-data-dir=" + filepath.Join(dir, "profile")}
	cmd := exec.CommandContext(ctx, browser, append(base, args...)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", browser, args, err, errb.String())
	}
	return out.Bytes()
}
