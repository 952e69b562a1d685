// Package proc runs the local cloud's helper processes (etcd, the Kubernetes
// control plane, KWOK, dynalite): free loopback ports, a per-user cache
// directory with cross-process build locks, and child processes that are
// always stopped by PID, never by name.
package proc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// CacheDir is where built binaries and installed npm packages live, outside
// the repository: $XDG_CACHE_HOME/nodewright/<sub>, default ~/.cache/nodewright/<sub>.
func CacheDir(sub ...string) (string, error) {
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("locate cache directory: %w", err)
		}
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(append([]string{base, "nodewright"}, sub...)...), nil
}

// Lock takes an exclusive advisory lock on path (created if needed), waiting
// until ctx is done. Several test binaries build or install the same cached
// artefact at once; the lock makes exactly one of them do the work.
func Lock(ctx context.Context, path string) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// FreePorts returns n distinct TCP ports that were free on 127.0.0.1 a moment
// ago. All listeners are held until every port is chosen so one call never
// returns the same port twice.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free loopback port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Process is a child process running in its own process group, with its
// output captured in a log file.
type Process struct {
	Name    string
	LogPath string

	cmd      *exec.Cmd
	logFile  *os.File
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// Spec describes a process to start.
type Spec struct {
	Name string   // short name used in errors and the log file name
	Path string   // executable
	Args []string // arguments, without the executable
	Dir  string   // working directory; empty means the current one
	Env  []string // full environment; nil inherits this process's
	Log  string   // log file path (stdout and stderr)
}

// Start launches spec. The child gets its own process group (so Stop reaches
// anything it forks) and is killed by the kernel if this process dies first,
// which covers test binaries killed by a timeout before cleanups run.
func Start(spec Spec) (*Process, error) {
	logFile, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: open log: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = spec.Env
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	p := &Process{Name: spec.Name, LogPath: spec.Log, cmd: cmd, logFile: logFile, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// PID is the child's process ID (also its process group ID).
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Exited reports whether the process has exited, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// Done is closed when the process exits.
func (p *Process) Done() <-chan struct{} { return p.done }

// Stop sends SIGTERM to the process group, waits up to grace, then SIGKILLs
// the group. It is safe to call more than once and from several goroutines.
func (p *Process) Stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		pgid := p.cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			<-p.done
		}
		// Anything the child forked into its group and left behind.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	})
	<-p.done
}

// Tail returns the last n lines of the process log, for error messages.
func (p *Process) Tail(n int) string { return TailFile(p.LogPath, n) }

// StartError describes a process that failed to come up, with its log tail.
func (p *Process) StartError(what string, err error) error {
	return fmt.Errorf("%s: %w\n--- last lines of %s ---\n%s", what, err, p.LogPath, p.Tail(30))
}

// ExitedError is "<prefix>exited: <how>", wrapping how the process exited
// (its wait error; "<nil>" for a clean exit).
func ExitedError(prefix string, werr error) error {
	if werr == nil {
		return errors.New(prefix + "exited: <nil>")
	}
	return fmt.Errorf("%sexited: %w", prefix, werr)
}

// Poll calls ready every interval until it reports true (nil) or an error
// (that error). It gives up when pr, if not nil, exits ("<name> exited:
// ..."), or when ctx ends: then it returns timedOut(ctx.Err()).
func Poll(ctx context.Context, pr *Process, interval time.Duration, ready func() (bool, error), timedOut func(error) error) error {
	for {
		ok, err := ready()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if pr != nil {
			if exited, werr := pr.Exited(); exited {
				return ExitedError(pr.Name+" ", werr)
			}
		}
		select {
		case <-ctx.Done():
			return timedOut(ctx.Err())
		case <-time.After(interval):
		}
	}
}

// TailFile returns the last n lines of the file at path ("" if unreadable).
func TailFile(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const limit = 64 << 10
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-limit, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(buf), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Run executes a short-lived command (a build, an install) and returns its
// combined output in the error when it fails.
func Run(ctx context.Context, dir string, env []string, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	if err := cmd.Run(); err != nil {
		o := out.String()
		if len(o) > 8<<10 {
			o = "...\n" + o[len(o)-8<<10:]
		}
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, o)
	}
	return nil
}

// EnvWith returns the current environment with the given KEY=VALUE entries
// replacing any existing ones.
func EnvWith(kv ...string) []string {
	env := os.Environ()
	out := env[:0:0]
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		replaced := false
		for _, n := range kv {
			if nk, _, _ := strings.Cut(n, "="); nk == k {
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, e)
		}
	}
	return append(out, kv...)
}

// Alive reports whether pid names a live process. Zombies count as dead: a
// killed child whose parent also died waits for init to reap it, which can
// take a moment.
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// Format: pid (comm) state ...; comm may contain spaces and parentheses.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return true
}
