package demo

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// uncommented drops the comment lines of a YAML file.
func uncommented(yaml []byte) []byte {
	var keep [][]byte
	for _, l := range bytes.Split(yaml, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			keep = append(keep, l)
		}
	}
	return bytes.Join(keep, []byte("\n"))
}

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
	if a, b := uncommented(embedded), uncommented(example); !bytes.Equal(a, b) {
		t.Errorf("testdata/inflate.yaml differs from infra/examples/workloads/inflate.yaml:\n%s\n---\n%s", a, b)
	}
}
