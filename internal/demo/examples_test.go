package demo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The demo embeds the inflate Deployment users apply in the README's
// getting started; the two copies must not drift apart.
func TestInflateIsTheExample(t *testing.T) {
	embedded, err := testdata.ReadFile("testdata/inflate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "infra", "examples", "workloads", "inflate.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if a, b := withoutComments(string(embedded)), withoutComments(string(example)); a != b {
		t.Errorf("testdata/inflate.yaml differs from infra/examples/workloads/inflate.yaml:\n%s\n---\n%s", a, b)
	}
}

func withoutComments(yaml string) string {
	var keep []string
	for _, l := range strings.Split(yaml, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
