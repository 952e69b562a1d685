// Package functions_test checks what the Lambda functions are built from.
package functions_test

import (
	"os/exec"
	"strings"
	"testing"
)

// Test-only code must never ship in a function: the local cloud (an AWS
// simulator, a control plane builder) and the test harnesses would be
// dead weight at best and a way to reach them at worst.
func TestFunctionsDoNotImportTestInfrastructure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", "./...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list found only %d packages: %s", len(deps), out)
	}
	for _, p := range deps {
		if strings.Contains(p, "/internal/localcloud") || strings.HasSuffix(p, "/cloudtest") || strings.Contains(p, "/cloudtest/") {
			t.Errorf("a function depends on %s", p)
		}
	}
}
