package apis

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestEveryExampleLoads loads every file under infra/examples with the real
// loader, and every example directory as a whole, as `cdk deploy -c
// configDir=infra/examples/<name>` and `nodewright validate` load it: the
// README points users at these files, so none may fail.
func TestEveryExampleLoads(t *testing.T) {
	var files int
	err := filepath.WalkDir(examplesDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		files++
		if _, err := Load(path); err != nil {
			t.Errorf("Load(%s):\n%v", path, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files == 0 {
		t.Fatalf("no files under %s", examplesDir)
	}
	dirs, err := os.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "workloads" {
			continue
		}
		dir := filepath.Join(examplesDir, d.Name())
		cfg, err := Load(dir)
		if err != nil {
			t.Errorf("Load(%s):\n%v", dir, err)
			continue
		}
		if len(cfg.NodePools) == 0 || len(cfg.NodeClasses) == 0 {
			t.Errorf("%s: %d NodePools, %d EC2NodeClasses: a configDir needs both", dir, len(cfg.NodePools), len(cfg.NodeClasses))
		}
	}
}
