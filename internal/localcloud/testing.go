package localcloud

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
)

// coldStartTimeout covers a first run that still has to build the control
// plane (~8 minutes on 2 cores, longer on a busy machine).
const coldStartTimeout = 30 * time.Minute

// ForTest starts a local cloud for one test (or benchmark) and stops it when
// the test ends. It skips the test in -short mode. Prefer Main for a whole
// package: a control plane takes seconds to start.
func ForTest(t testing.TB, opts Options) *Cloud {
	t.Helper()
	SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), coldStartTimeout)
	defer cancel()
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start local cloud: %v", err)
	}
	t.Cleanup(func() {
		if checkIAM(c, packageName()+"/"+t.Name()) != 0 {
			t.Error("the stack's IAM policy refused calls (listed above)")
		}
		if t.Failed() {
			if dir, err := c.SaveLogs(); err == nil {
				t.Logf("local cloud logs kept in %s", dir)
			}
		}
		if err := c.Close(); err != nil {
			t.Errorf("close local cloud: %v", err)
		}
	})
	return c
}

// SkipIfShort skips integration tests in -short mode.
func SkipIfShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the local cloud (skipped in -short)")
	}
}

// Main runs a test package against one shared local cloud, for TestMain:
//
//	var cloud *localcloud.Cloud
//	func TestMain(m *testing.M) { os.Exit(localcloud.Main(m, localcloud.Options{}, &cloud)) }
//
// In -short mode nothing starts and *cloud stays nil (tests call
// SkipIfShort). The cloud is stopped after the tests, and also on SIGINT or
// SIGTERM; a process that outlives Close fails the run.
func Main(m *testing.M, opts Options, cloud **Cloud) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	if opts.Logger == nil && testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	ctx, cancel := context.WithTimeout(context.Background(), coldStartTimeout)
	c, err := Start(ctx, opts)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "local cloud:", err)
		return 1
	}
	*cloud = c
	pids := c.PIDs()

	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s, ok := <-sig
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "local cloud: %v: stopping\n", s)
		c.Close()
		os.Exit(1)
	}()

	code := m.Run()
	signal.Stop(sig)
	close(sig)
	code = max(code, checkForbidden(c), checkIAM(c, packageName()))
	if code != 0 {
		if dir, err := c.SaveLogs(); err == nil {
			fmt.Fprintln(os.Stderr, "local cloud logs kept in", dir)
		}
	}
	if err := c.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "local cloud: close:", err)
		code = 1
	}
	if leaked := alive(pids); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "local cloud: processes %v still exist after Close\n", leaked)
		code = 1
	}
	return code
}

// NewNamespace creates a fresh namespace for one test and deletes it when
// the test ends.
func (c *Cloud) NewNamespace(t testing.TB) string {
	t.Helper()
	if c.Plane == nil {
		t.Fatal("NewNamespace: the local cloud runs no control plane")
	}
	return c.Plane.NewNamespace(t)
}

// checkForbidden fails a package whose tests made the API server refuse the
// controllers anything: every function's client runs with exactly the
// rights the stack gives it, so a 403 is a right missing from
// access.ControllerClusterRole (or a function doing what it must not).
func checkForbidden(c *Cloud) int {
	denied, err := c.Forbidden()
	if err != nil {
		fmt.Fprintln(os.Stderr, "local cloud: read the audit log:", err)
		return 1
	}
	if len(denied) > 0 {
		fmt.Fprintf(os.Stderr, "local cloud: the API server refused the controllers %d kinds of request (403):\n  %s\n", len(denied), strings.Join(denied, "\n  "))
		return 1
	}
	return 0
}

// alive returns the PIDs that still exist.
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if proc.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Shared is a local cloud shared by a test package and started lazily by
// the first test that asks for it, so -short runs and benchmark-only runs
// start nothing:
//
//	var shared = localcloud.NewShared(localcloud.Options{})
//	func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
//	func TestX(t *testing.T) { cloud := shared.Get(t); ... }
type Shared struct {
	opts  Options
	once  sync.Once
	cloud *Cloud
	err   error
	pids  []int
}

// NewShared prepares (but does not start) a shared local cloud.
func NewShared(opts Options) *Shared { return &Shared{opts: opts} }

// Get returns the shared cloud, starting it on first use; it skips the test
// in -short mode and fails it if the cloud cannot start.
func (s *Shared) Get(t testing.TB) *Cloud {
	t.Helper()
	SkipIfShort(t)
	s.once.Do(func() {
		opts := s.opts
		if opts.Logger == nil && testing.Verbose() {
			opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		}
		ctx, cancel := context.WithTimeout(context.Background(), coldStartTimeout)
		defer cancel()
		s.cloud, s.err = Start(ctx, opts)
		if s.err == nil {
			s.pids = s.cloud.PIDs()
		}
	})
	if s.err != nil {
		t.Fatalf("start local cloud: %v", s.err)
	}
	return s.cloud
}

// Main runs the package's tests and stops the shared cloud afterwards (and
// on SIGINT/SIGTERM); a process that outlives Close fails the run.
func (s *Shared) Main(m *testing.M) int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		if _, ok := <-sig; ok {
			fmt.Fprintln(os.Stderr, "local cloud: interrupted: stopping")
			s.close()
			os.Exit(1)
		}
	}()
	code := m.Run()
	signal.Stop(sig)
	close(sig)
	if s.cloud != nil {
		code = max(code, checkForbidden(s.cloud), checkIAM(s.cloud, packageName()))
	}
	if code != 0 && s.cloud != nil {
		if dir, err := s.cloud.SaveLogs(); err == nil {
			fmt.Fprintln(os.Stderr, "local cloud logs kept in", dir)
		}
	}
	if err := s.close(); err != nil {
		fmt.Fprintln(os.Stderr, "local cloud: close:", err)
		code = 1
	}
	if leaked := alive(s.pids); len(leaked) > 0 {
		fmt.Fprintf(os.Stderr, "local cloud: processes %v still exist after Close\n", leaked)
		code = 1
	}
	return code
}

func (s *Shared) close() error {
	// Prevent a late Get from starting a cloud nobody will stop.
	s.once.Do(func() { s.err = errors.New("local cloud already shut down") })
	if s.cloud == nil {
		return nil
	}
	return s.cloud.Close()
}

// packageName names the test binary's package for reports (its working
// directory, which go test sets to the package's).
func packageName() string {
	wd, err := os.Getwd()
	if err != nil {
		return "unknown"
	}
	if root, err := repoRoot(); err == nil {
		if rel, err := filepath.Rel(root, wd); err == nil {
			return rel
		}
	}
	return filepath.Base(wd)
}
