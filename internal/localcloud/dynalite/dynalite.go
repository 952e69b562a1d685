// Package dynalite runs dynalite, a DynamoDB-compatible server from npm, in
// memory on a free loopback port. The npm package is pinned by the embedded
// package.json/package-lock.json and installed with `npm ci` into a cache
// directory outside the repository, keyed by the lock file's hash.
package dynalite

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
)

//go:embed package.json
var packageJSON []byte

//go:embed package-lock.json
var packageLock []byte

//go:embed abortguard.js
var abortGuard []byte

// Options configure a dynalite server.
type Options struct {
	// TableStateDelay is how long tables stay CREATING/DELETING/UPDATING.
	// Zero makes them ACTIVE at once; real DynamoDB takes seconds, so code
	// under test must wait for ACTIVE either way.
	TableStateDelay time.Duration
	// Dir holds the log file; empty means a new temporary directory that
	// Close removes.
	Dir string
	// Logger receives progress messages (install, start); nil discards them.
	Logger *slog.Logger
}

// Server is a running dynalite.
type Server struct {
	endpoint string
	proc     *proc.Process
	dir      string
	ownDir   bool
}

// Install makes sure the pinned dynalite is installed in the cache and
// returns the path of its cli.js. Safe to call concurrently from several
// processes.
func Install(ctx context.Context, logger *slog.Logger) (string, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	sum := sha256.Sum256(packageLock)
	key := hex.EncodeToString(sum[:])[:12]
	root, err := proc.CacheDir("dynalite")
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, key)
	cli := filepath.Join(dir, "node_modules", "dynalite", "cli.js")
	if _, err := os.Stat(cli); err == nil {
		return cli, nil
	}
	unlock, err := proc.Lock(ctx, filepath.Join(root, key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(cli); err == nil {
		return cli, nil // another process installed it while we waited
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("install dynalite: npm not found on PATH: %w", err)
	}
	tmp, err := os.MkdirTemp(root, key+".tmp-")
	if err != nil {
		return "", fmt.Errorf("install dynalite: %w", err)
	}
	defer os.RemoveAll(tmp)
	for name, data := range map[string][]byte{"package.json": packageJSON, "package-lock.json": packageLock} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", fmt.Errorf("install dynalite: %w", err)
		}
	}
	logger.InfoContext(ctx, "installing dynalite with npm ci", "dir", dir)
	start := time.Now()
	if err := proc.Run(ctx, tmp, nil, npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"); err != nil {
		return "", fmt.Errorf("install dynalite: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return "", fmt.Errorf("install dynalite: %w", err)
	}
	logger.InfoContext(ctx, "installed dynalite", "dir", dir, "took", time.Since(start).Round(time.Millisecond))
	return cli, nil
}

// Start installs dynalite if needed and starts it in memory on a free
// loopback port, returning once it answers DynamoDB requests.
func Start(ctx context.Context, opts Options) (*Server, error) {
	cli, err := Install(ctx, opts.Logger)
	if err != nil {
		return nil, err
	}
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("start dynalite: node not found on PATH: %w", err)
	}
	s := &Server{dir: opts.Dir}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "nodewright-dynalite-"); err != nil {
			return nil, fmt.Errorf("start dynalite: %w", err)
		}
		s.ownDir = true
	}
	// A port picked here can be taken by someone else before dynalite binds
	// it; try a few.
	var lastErr error
	for range 3 {
		if lastErr = s.start(ctx, node, cli, opts); lastErr == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	s.Close()
	return nil, lastErr
}

func (s *Server) start(ctx context.Context, node, cli string, opts Options) error {
	ports, err := proc.FreePorts(1)
	if err != nil {
		return err
	}
	ms := strconv.FormatInt(opts.TableStateDelay.Milliseconds(), 10)
	guard := filepath.Join(s.dir, "abortguard.js")
	if err := os.WriteFile(guard, abortGuard, 0o644); err != nil {
		return fmt.Errorf("start dynalite: %w", err)
	}
	p, err := proc.Start(proc.Spec{
		Name: "dynalite",
		Path: node,
		Args: []string{"--require", guard, cli, "--host", "127.0.0.1", "--port", strconv.Itoa(ports[0]),
			"--createTableMs", ms, "--deleteTableMs", ms, "--updateTableMs", ms},
		Log: filepath.Join(s.dir, "dynalite.log"),
	})
	if err != nil {
		return err
	}
	endpoint := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	if err := waitReady(ctx, p, endpoint); err != nil {
		p.Stop(time.Second)
		return p.StartError("start dynalite", err)
	}
	s.proc, s.endpoint = p, endpoint
	return nil
}

// waitReady polls until dynalite answers an (unsigned) DynamoDB request; any
// DynamoDB-shaped answer, even an authentication error, proves it serves.
func waitReady(ctx context.Context, p *proc.Process, endpoint string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	return proc.Poll(ctx, p, 50*time.Millisecond, func() (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader([]byte("{}")))
		if err != nil {
			return false, err
		}
		req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
		req.Header.Set("Content-Type", "application/x-amz-json-1.0")
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.Header.Get("x-amzn-RequestId") != "" || resp.StatusCode < 500 {
				return true, nil
			}
		}
		return false, nil
	}, func(err error) error {
		return fmt.Errorf("dynalite not answering on %s: %w", endpoint, err)
	})
}

// Endpoint is the http URL of the DynamoDB API (for AWS_ENDPOINT_URL_DYNAMODB).
func (s *Server) Endpoint() string { return s.endpoint }

// LogPath is dynalite's log file ("" before it started).
func (s *Server) LogPath() string {
	if s.proc == nil {
		return ""
	}
	return s.proc.LogPath
}

// PID of the node process, for state files and diagnostics.
func (s *Server) PID() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.PID()
}

// Close stops dynalite and removes its temporary directory. Safe to call twice.
func (s *Server) Close() error {
	if s.proc != nil {
		s.proc.Stop(3 * time.Second)
	}
	if s.ownDir && s.dir != "" {
		if err := os.RemoveAll(s.dir); err != nil {
			return fmt.Errorf("remove dynalite dir: %w", err)
		}
		s.dir = ""
	}
	return nil
}
