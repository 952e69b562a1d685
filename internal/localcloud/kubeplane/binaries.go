package kubeplane

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
)

// KubeVersion is the Kubernetes release the tools module pins.
const KubeVersion = "v1.37.2"

// toolsModule is the import path of the nested module that pins the control
// plane's sources (internal/localcloud/tools).
const toolsModule = "github.com/nodewright/nodewright/internal/localcloud/tools"

// components maps each binary name to the package that builds it.
var components = []struct{ name, pkg string }{
	{"etcd", "go.etcd.io/etcd/server/v3"},
	{"kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver"},
	{"kube-controller-manager", "k8s.io/kubernetes/cmd/kube-controller-manager"},
	{"kube-scheduler", "k8s.io/kubernetes/cmd/kube-scheduler"},
	{"kubectl", "k8s.io/kubernetes/cmd/kubectl"},
	{"kwok", "sigs.k8s.io/kwok/cmd/kwok"},
}

// Binaries are the paths of the built control plane executables.
type Binaries struct {
	Dir                   string
	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	// Kubectl is for people and tests: `nodewright local env` puts its
	// directory on PATH.
	Kubectl string
	KWOK    string
}

func binariesIn(dir string) (*Binaries, bool) {
	for _, c := range components {
		if st, err := os.Stat(filepath.Join(dir, c.name)); err != nil || st.Mode()&0o111 == 0 {
			return nil, false
		}
	}
	return &Binaries{
		Dir:                   dir,
		Etcd:                  filepath.Join(dir, "etcd"),
		KubeAPIServer:         filepath.Join(dir, "kube-apiserver"),
		KubeControllerManager: filepath.Join(dir, "kube-controller-manager"),
		KubeScheduler:         filepath.Join(dir, "kube-scheduler"),
		Kubectl:               filepath.Join(dir, "kubectl"),
		KWOK:                  filepath.Join(dir, "kwok"),
	}, true
}

// ToolsDir locates the tools module: $NODEWRIGHT_TOOLS_DIR, else the
// repository containing the working directory (go test runs in the package
// directory; people run the CLI from the repository), else the source tree
// this package was compiled from.
func ToolsDir() (string, error) {
	if d := os.Getenv("NODEWRIGHT_TOOLS_DIR"); d != "" {
		if isToolsDir(d) {
			return d, nil
		}
		return "", fmt.Errorf("NODEWRIGHT_TOOLS_DIR=%s has no go.mod for %s", d, toolsModule)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if c := filepath.Join(d, "internal", "localcloud", "tools"); isToolsDir(c) {
				return c, nil
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		if c := filepath.Join(filepath.Dir(file), "..", "tools"); isToolsDir(c) {
			return filepath.Clean(c), nil
		}
	}
	return "", errors.New("tools module internal/localcloud/tools not found: run from the nodewright repository or set NODEWRIGHT_TOOLS_DIR")
}

func isToolsDir(d string) bool {
	b, err := os.ReadFile(filepath.Join(d, "go.mod"))
	return err == nil && strings.Contains(string(b), "module "+toolsModule+"\n")
}

// EnsureBinaries returns the control plane binaries for the tools module's
// pinned versions, building them first if the cache lacks them (~8 minutes
// on 2 cores the first time). The cache key hashes the tools go.sum and the
// list of binaries (cacheKey), so a version bump builds afresh and never
// mixes binaries. Concurrent callers in
// other processes wait on a file lock instead of building twice.
func EnsureBinaries(ctx context.Context, logger *slog.Logger) (*Binaries, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	root, err := proc.CacheDir("controlplane")
	if err != nil {
		return nil, err
	}
	tools, err := ToolsDir()
	if err != nil {
		// An installed CLI outside the repository can still reuse a build.
		if b, ok := newestBuild(root); ok {
			logger.WarnContext(ctx, "tools module not found; using cached control plane binaries", "dir", b.Dir)
			return b, nil
		}
		return nil, err
	}
	sum, err := os.ReadFile(filepath.Join(tools, "go.sum"))
	if err != nil {
		return nil, fmt.Errorf("read tools go.sum: %w", err)
	}
	key := cacheKey(sum)
	binDir := filepath.Join(root, key, "bin")
	if b, ok := binariesIn(binDir); ok {
		return b, nil
	}
	unlock, err := proc.Lock(ctx, filepath.Join(root, key+".lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()
	if b, ok := binariesIn(binDir); ok {
		return b, nil // built by another process while we waited
	}
	if err := build(ctx, logger, tools, binDir); err != nil {
		return nil, err
	}
	b, ok := binariesIn(binDir)
	if !ok {
		return nil, fmt.Errorf("build control plane: binaries missing from %s after build", binDir)
	}
	return b, nil
}

// cacheKey names a build by the tools module's go.sum and the binaries
// built from it: a version bump or a binary added to components (kubectl
// was) builds afresh into a new directory, never over or beside an older
// set.
func cacheKey(goSum []byte) string {
	h := sha256.New()
	h.Write(goSum)
	for _, c := range components {
		fmt.Fprintf(h, "\n%s=%s", c.name, c.pkg)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// LDFlags stamps the Kubernetes version into the binaries; without it they
// report v0.0.0-master, which clients (kubectl, discovery) cannot parse.
func LDFlags() string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(KubeVersion, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var b strings.Builder
	b.WriteString("-s -w")
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		fmt.Fprintf(&b, " -X %s.gitVersion=%s -X %s.gitMajor=%s -X %s.gitMinor=%s", pkg, KubeVersion, pkg, major, pkg, minor)
	}
	return b.String()
}

func build(ctx context.Context, logger *slog.Logger, tools, binDir string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("build control plane: go not found on PATH: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(binDir), 0o755); err != nil {
		return fmt.Errorf("build control plane: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(binDir), "bin.tmp-")
	if err != nil {
		return fmt.Errorf("build control plane: %w", err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("build control plane: %w", err)
	}

	logger.InfoContext(ctx, "building the Kubernetes control plane from the module proxy (first time only)",
		"tools", tools, "into", binDir, "expected-total", buildExpected)
	start := time.Now()
	// One go build compiles all six binaries and prints nothing until it
	// ends, so say every progressEvery that it is still going.
	defer progress(ctx, logger, progressEvery, start, buildStep)()
	args := []string{"build", "-C", tools, "-trimpath", "-ldflags", LDFlags(), "-o", tmp + string(filepath.Separator)}
	for _, c := range components {
		args = append(args, c.pkg)
	}
	// -mod=mod lets the build fill the module cache from go.sum on a fresh
	// machine; GOWORK=off keeps a developer's go.work from leaking in.
	env := proc.EnvWith("GOFLAGS=-mod=mod -buildvcs=false", "GOWORK=off")
	if err := proc.Run(ctx, tools, env, goBin, args...); err != nil {
		return fmt.Errorf("build control plane: %w", err)
	}
	// go build names a binary after the last import path element, skipping a
	// major version suffix: etcd's server/v3 comes out as "server".
	for _, c := range components {
		out := filepath.Join(tmp, builtName(c.pkg))
		if out != filepath.Join(tmp, c.name) {
			if err := os.Rename(out, filepath.Join(tmp, c.name)); err != nil {
				return fmt.Errorf("build control plane: %w", err)
			}
		}
	}
	if err := os.Rename(tmp, binDir); err != nil {
		return fmt.Errorf("build control plane: install into %s: %w", binDir, err)
	}
	logger.InfoContext(ctx, "built the control plane", "took", time.Since(start).Round(time.Second), "dir", binDir)
	return nil
}

// buildExpected is how long the cold build takes on 2 cores; buildStep names
// what it does (go build fetches the sources from the module proxy first).
const (
	buildExpected = 8 * time.Minute
	buildStep     = "download sources and compile etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok"
	progressEvery = 15 * time.Second
)

// progress logs every interval, until the returned stop is called, that step
// is still running: how long it has run and how long it is expected to take,
// so a first build is not minutes of silence.
func progress(ctx context.Context, logger *slog.Logger, interval time.Duration, start time.Time, step string) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		ticks := time.NewTicker(interval)
		defer ticks.Stop()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-ticks.C:
				logger.InfoContext(ctx, "building the control plane", "step", step,
					"elapsed", time.Since(start).Round(time.Second), "expected-total", buildExpected)
			}
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

func builtName(pkg string) string {
	elems := strings.Split(pkg, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		last = elems[len(elems)-2]
	}
	return last
}

// newestBuild finds the most recently built complete binary set in the cache.
func newestBuild(root string) (*Binaries, bool) {
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, false
	}
	type cand struct {
		b   *Binaries
		mod time.Time
	}
	var cands []cand
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name(), "bin")
		if b, ok := binariesIn(dir); ok {
			st, _ := os.Stat(dir)
			cands = append(cands, cand{b, st.ModTime()})
		}
	}
	if len(cands) == 0 {
		return nil, false
	}
	slices.SortFunc(cands, func(a, b cand) int { return b.mod.Compare(a.mod) })
	return cands[0].b, true
}
