package infra

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// LayerConfigDir is where the functions find the NodePool/EC2NodeClass YAML:
// the config layer unpacks under /opt.
const LayerConfigDir = "/opt/nodewright/config"

// placeholderBootstrap is what a placeholder asset contains: a function that
// fails loudly if someone deploys a synth made without `make build`.
const placeholderBootstrap = "#!/bin/sh\necho 'nodewright: placeholder code deployed; run make build and deploy again' >&2\nexit 1\n"

// functionCode returns the directory holding <name>/bootstrap: the build
// output when present, else (only with PlaceholderAssets) a placeholder in
// the staging directory.
func functionCode(cfg Config, staging, name string) (string, error) {
	dir := filepath.Join(cfg.AssetDir, name)
	st, err := os.Stat(filepath.Join(dir, "bootstrap"))
	if err == nil && st.Mode().IsRegular() {
		return dir, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("function %s: %w", name, err)
	}
	if !cfg.PlaceholderAssets {
		return "", fmt.Errorf("function %s: %s not found: run `make build` first (or synthesize with -c %s=true to check the template without function code)",
			name, filepath.Join(dir, "bootstrap"), CtxPlaceholderAssets)
	}
	ph := filepath.Join(staging, "placeholder", name)
	if err := os.MkdirAll(ph, 0o755); err != nil {
		return "", fmt.Errorf("placeholder for %s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(ph, "bootstrap"), []byte(placeholderBootstrap), 0o755); err != nil {
		return "", fmt.Errorf("placeholder for %s: %w", name, err)
	}
	return ph, nil
}

// stageConfigLayer copies the validated YAML files into a layer directory
// (nodewright/config/<file>) so they unpack at LayerConfigDir.
func stageConfigLayer(staging string, files []string) (string, error) {
	root := filepath.Join(staging, "config-layer")
	dst := filepath.Join(root, "nodewright", "config")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return "", fmt.Errorf("stage config layer: %w", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("stage config layer: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
			return "", fmt.Errorf("stage config layer: %w", err)
		}
	}
	return root, nil
}
