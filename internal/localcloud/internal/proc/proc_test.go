package proc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Stop must reach grandchildren: a shell that forks sleeps leaves none behind.
func TestStopKillsTheProcessGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "grandchild.pid")
	p, err := Start(Spec{
		Name: "sh",
		Path: "/bin/sh",
		// The trap ignores SIGTERM so the SIGKILL escalation is exercised too.
		Args: []string{"-c", "trap '' TERM; sleep 300 & echo $! > " + pidFile + "; wait"},
		Log:  filepath.Join(dir, "sh.log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	var grandchild int
	deadline := time.Now().Add(5 * time.Second)
	for grandchild == 0 && time.Now().Before(deadline) {
		if b, err := os.ReadFile(pidFile); err == nil && strings.TrimSpace(string(b)) != "" {
			grandchild, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if grandchild == 0 {
		t.Fatal("grandchild never started")
	}
	start := time.Now()
	p.Stop(300 * time.Millisecond)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Stop took %s", took)
	}
	if exited, _ := p.Exited(); !exited {
		t.Fatal("process still running after Stop")
	}
	// The orphaned sleep is reaped by init shortly after SIGKILL.
	for i := 0; i < 100; i++ {
		if !Alive(grandchild) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("grandchild %d survived Stop", grandchild)
}

func TestStartErrorCarriesLogTail(t *testing.T) {
	dir := t.TempDir()
	p, err := Start(Spec{Name: "failer", Path: "/bin/sh", Args: []string{"-c", "echo line1; echo 'bind: address already in use' >&2; exit 3"}, Log: filepath.Join(dir, "f.log")})
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	exited, werr := p.Exited()
	if !exited || werr == nil {
		t.Fatalf("exited=%v err=%v, want exit status 3", exited, werr)
	}
	msg := p.StartError("start failer", werr).Error()
	if !strings.Contains(msg, "address already in use") || !strings.Contains(msg, "line1") || !strings.Contains(msg, "exit status 3") {
		t.Fatalf("error lacks the log tail or cause: %s", msg)
	}
}

func TestTailFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "log")
	var b strings.Builder
	for i := range 100 {
		b.WriteString("line " + strconv.Itoa(i) + "\n")
	}
	os.WriteFile(path, []byte(b.String()), 0o644)
	if got, want := TailFile(path, 3), "line 97\nline 98\nline 99"; got != want {
		t.Fatalf("TailFile = %q, want %q", got, want)
	}
	if got := TailFile(filepath.Join(t.TempDir(), "missing"), 3); got != "" {
		t.Fatalf("TailFile(missing) = %q", got)
	}
}

func TestLockExcludesAndHonoursContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	// flock locks belong to the open file description, so a second open in
	// the same process contends like another process would.
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := Lock(ctx, path); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock while held: %v, want deadline exceeded", err)
	}
	unlock()
	unlock2, err := Lock(context.Background(), path)
	if err != nil {
		t.Fatalf("Lock after unlock: %v", err)
	}
	unlock2()
}

func TestFreePortsDistinct(t *testing.T) {
	ports, err := FreePorts(20)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p <= 0 || seen[p] {
			t.Fatalf("ports %v: bad or repeated %d", ports, p)
		}
		seen[p] = true
	}
}

func TestCacheDirRespectsXDG(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/somewhere/cache")
	got, err := CacheDir("controlplane")
	if err != nil || got != "/somewhere/cache/nodewright/controlplane" {
		t.Fatalf("CacheDir = %q, %v", got, err)
	}
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv("HOME", "/home/dev")
	if got, _ := CacheDir(); got != "/home/dev/.cache/nodewright" {
		t.Fatalf("CacheDir without XDG = %q", got)
	}
}

func TestEnvWithReplaces(t *testing.T) {
	t.Setenv("NW_TEST_A", "old")
	env := EnvWith("NW_TEST_A=new", "NW_TEST_B=b")
	var a []string
	for _, e := range env {
		if strings.HasPrefix(e, "NW_TEST_A=") {
			a = append(a, e)
		}
	}
	if len(a) != 1 || a[0] != "NW_TEST_A=new" || env[len(env)-1] != "NW_TEST_B=b" {
		t.Fatalf("EnvWith: NW_TEST_A entries %v, last %q", a, env[len(env)-1])
	}
}

func TestAlive(t *testing.T) {
	if !Alive(os.Getpid()) {
		t.Fatal("this process is not alive")
	}
	if Alive(0) || Alive(-1) {
		t.Fatal("non-positive pid alive")
	}
}
