package simulation

import (
	"bytes"
	"testing"

	"github.com/nodewright/nodewright/internal/browsertest"
)

// TestWriteHTMLInChromium renders the page in a real headless Chromium: the
// DOM it builds has both node bars, and the screenshot shows each NodePool's
// colour over the area its CPU bar should fill.
func TestWriteHTMLInChromium(t *testing.T) {
	page := browsertest.Open(t, browsertest.Browser(t), renderFixture(t))
	dom := page.DOM()
	if n := bytes.Count(dom, []byte(`class="node"`)); n != 2 || !bytes.Contains(dom, []byte("&lt;script&gt;")) {
		t.Errorf("chromium's DOM has %d node bars or lost the escaping:\n%s", n, dom)
	}
	// The CPU bars: default 78 % and batch 100 % of a track a few hundred
	// pixels wide and 16 high; the memory bars are translucent.
	counts := page.Colours(1200, 900)
	for _, colour := range []string{"#1f77b4", "#ff7f0e"} {
		if counts[colour] < 2000 {
			t.Errorf("screenshot has %d pixels of %s, want a bar's worth (>= 2000)", counts[colour], colour)
		}
	}
}
