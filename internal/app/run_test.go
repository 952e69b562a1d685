package app

import (
	"strings"
	"testing"
)

// The webhook and the registrar are not controller functions: asking for
// their handler (or a misspelt name) is an error, not a nil handler.
func TestFunctionHandlerRefusesUnknownNames(t *testing.T) {
	for _, fn := range []string{"webhook", "provisoner", ""} {
		if h, err := (&App{}).FunctionHandler(fn); err == nil || h != nil || !strings.Contains(err.Error(), "no function") {
			t.Errorf("FunctionHandler(%q) = %v, %v; want an error", fn, h != nil, err)
		}
	}
}
