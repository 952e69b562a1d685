package karpenter

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
)

// Version is the Karpenter release this module pins (go.mod).
const Version = "v1.14.1"

// module is this module's path: the build runs in its folder, where go.mod
// pins Karpenter and the versions it compiles with.
const module = "github.com/nodewright/nodewright/internal/localcloud/karpenter"

// kwokPackage is the main package of Karpenter's KWOK provider.
const kwokPackage = "sigs.k8s.io/karpenter/kwok"

// crdDirs are the folders of Karpenter's module holding the CRDs the KWOK
// provider needs: karpenter.sh (NodePool, NodeClaim, NodeOverlay),
// autoscaling.x-k8s.io (CapacityBuffer) and karpenter.kwok.sh
// (KWOKNodeClass).
var crdDirs = []string{"kwok/charts/crds", "kwok/apis/crds"}

// Build is a built Karpenter: the controller binary and the CRD files of
// the same release.
type Build struct {
	Binary string
	CRDs   []string
}

// EnsureBinary returns the KWOK Karpenter controller of this module's
// pinned release, building it first when the cache lacks it (minutes on
// 2 cores the first time). It is cached like the local control plane:
// under $XDG_CACHE_HOME/nodewright/karpenter/<go.sum hash>, so a version
// bump builds afresh, and processes building at once wait on a lock.
func EnsureBinary(ctx context.Context, logger *slog.Logger) (*Build, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dir, err := moduleDir()
	if err != nil {
		return nil, err
	}
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	if err != nil {
		return nil, fmt.Errorf("karpenter: read go.sum: %w", err)
	}
	root, err := proc.CacheDir("karpenter")
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%x", sha256.Sum256(sum))[:12]
	out := filepath.Join(root, key)
	b, ok := builtIn(out)
	if ok {
		return b, nil
	}
	unlock, err := proc.Lock(ctx, filepath.Join(root, key+".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	// Another process may have built it while this one waited for the lock.
	if b, ok = builtIn(out); !ok {
		if err := build(ctx, logger, dir, out); err != nil {
			return nil, err
		}
		b, ok = builtIn(out)
	}
	if !ok {
		return nil, fmt.Errorf("karpenter: build left no binary or CRDs in %s", out)
	}
	return b, nil
}

// builtIn finds a complete build in dir.
func builtIn(dir string) (*Build, bool) {
	bin := filepath.Join(dir, "karpenter-kwok")
	if st, err := os.Stat(bin); err != nil || st.Mode()&0o111 == 0 {
		return nil, false
	}
	crds, _ := filepath.Glob(filepath.Join(dir, "crds", "*.yaml"))
	if len(crds) == 0 {
		return nil, false
	}
	return &Build{Binary: bin, CRDs: crds}, true
}

// build compiles the controller and copies the release's CRDs into out,
// through a temporary folder renamed at the end so a crash leaves nothing
// half built.
func build(ctx context.Context, logger *slog.Logger, dir, out string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("karpenter: go not found on PATH: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), "build.tmp-")
	if err != nil {
		return fmt.Errorf("karpenter: %w", err)
	}
	defer os.RemoveAll(tmp)
	logger.InfoContext(ctx, "building Karpenter's KWOK provider from the module proxy (first time only)",
		"version", Version, "into", out)
	start := time.Now()
	// -mod=mod fills the module cache from go.sum on a fresh machine;
	// GOWORK=off keeps a developer's go.work out.
	env := proc.EnvWith("GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	if err := proc.Run(ctx, dir, env, goBin, "build", "-trimpath", "-ldflags", "-s -w",
		"-o", filepath.Join(tmp, "karpenter-kwok"), kwokPackage); err != nil {
		return fmt.Errorf("karpenter: build %s: %w", kwokPackage, err)
	}
	src, err := karpenterSource(ctx, goBin, dir, env)
	if err != nil {
		return err
	}
	if err := copyCRDs(src, filepath.Join(tmp, "crds")); err != nil {
		return err
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("karpenter: install into %s: %w", out, err)
	}
	logger.InfoContext(ctx, "built Karpenter", "took", time.Since(start).Round(time.Second), "dir", out)
	return nil
}

// karpenterSource is where the module cache holds Karpenter's sources.
func karpenterSource(ctx context.Context, goBin, dir string, env []string) (string, error) {
	cmd := exec.CommandContext(ctx, goBin, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/karpenter")
	cmd.Dir, cmd.Env = dir, env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("karpenter: locate its sources: %w: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(b)), nil
}

func copyCRDs(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("karpenter: %w", err)
	}
	for _, d := range crdDirs {
		files, err := filepath.Glob(filepath.Join(src, d, "*.yaml"))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("karpenter: no CRDs in %s", filepath.Join(src, d))
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return fmt.Errorf("karpenter: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644); err != nil {
				return fmt.Errorf("karpenter: %w", err)
			}
		}
	}
	return nil
}

// moduleDir finds this module's folder at or above the working directory
// (go test runs in the package folder, make in the repository's).
func moduleDir() (string, error) {
	isModule := func(d string) bool {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		return err == nil && strings.HasPrefix(string(b), "module "+module+"\n")
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if isModule(d) {
				return d, nil
			}
			if c := filepath.Join(d, "internal", "localcloud", "karpenter"); isModule(c) {
				return c, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return "", fmt.Errorf("karpenter: module %s not found above the working directory: run from the nodewright repository", module)
}
