package localcloud

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/nodewright/nodewright/internal/localcloud/awssim"
)

// EnvIAMCoverageDir names a directory where every test package's local
// cloud writes which policy statements its calls used (iam-coverage.go
// reads them all: `make iam-coverage`).
const EnvIAMCoverageDir = "NODEWRIGHT_IAM_COVERAGE_DIR"

// expectations are denials a test provokes on purpose.
type expectations struct {
	mu    sync.Mutex
	match []func(awssim.Denial) bool
}

// ExpectDenials marks denials matching f as provoked on purpose (a test of
// the policy itself), so the package's end-of-run check does not count
// them. It returns f's count of matches so far, for the test to assert on.
func (c *Cloud) ExpectDenials(f func(awssim.Denial) bool) (matched func() int) {
	c.expected.mu.Lock()
	c.expected.match = append(c.expected.match, f)
	c.expected.mu.Unlock()
	return func() int {
		n := 0
		for _, d := range c.AWS.Denials() {
			if f(d) {
				n++
			}
		}
		return n
	}
}

// IAMDenials returns the calls the simulator refused under a stack's
// policies that no test expected: each is a right the stack's policy
// lacks (or a function doing what it must not).
func (c *Cloud) IAMDenials() []awssim.Denial {
	if c.AWS == nil {
		return nil
	}
	c.expected.mu.Lock()
	defer c.expected.mu.Unlock()
	var out []awssim.Denial
	for _, d := range c.AWS.Denials() {
		expected := false
		for _, f := range c.expected.match {
			expected = expected || f(d)
		}
		if !expected {
			out = append(out, d)
		}
	}
	return out
}

// IAMEnforced reports whether Deploy's roles are evaluated under the
// synthesized policies.
func (c *Cloud) IAMEnforced() bool { return c.iamTemplate != nil }

// checkIAM fails a package whose calls the stack's policies refused, and
// writes the statements its calls used for the coverage report.
func checkIAM(c *Cloud, pkg string) int {
	if !c.IAMEnforced() {
		return 0
	}
	uses := slices.DeleteFunc(c.AWS.StatementUses(), func(u awssim.StatementUse) bool {
		return strings.HasPrefix(u.Statement, ShadowStatementPrefix)
	})
	used := 0
	for _, u := range uses {
		if u.Allowed > 0 {
			used++
		}
	}
	denied := c.IAMDenials()
	fmt.Fprintf(os.Stderr, "local cloud: iam=enforced denied=%d statements-used=%d/%d\n", len(denied), used, len(uses))
	if dir := os.Getenv(EnvIAMCoverageDir); dir != "" {
		if err := writeCoverage(dir, pkg, uses); err != nil {
			fmt.Fprintln(os.Stderr, "local cloud:", err)
		}
	}
	if len(denied) == 0 {
		return 0
	}
	var b strings.Builder
	for _, d := range denied {
		fmt.Fprintf(&b, "\n  %s", strings.ReplaceAll(d.String(), "\n", "\n  "))
	}
	fmt.Fprintf(os.Stderr, "local cloud: the stack's IAM policy refused %d calls:%s\n", len(denied), b.String())
	return 1
}

func writeCoverage(dir, pkg string, uses []awssim.StatementUse) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("iam coverage: %w", err)
	}
	b, err := json.MarshalIndent(uses, "", "  ")
	if err != nil {
		return err
	}
	name := strings.NewReplacer("/", "_", ".", "_").Replace(pkg) + ".json"
	return os.WriteFile(filepath.Join(dir, name), b, 0o644)
}
