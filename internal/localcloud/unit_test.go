package localcloud

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMinorVersion(t *testing.T) {
	for in, want := range map[string]string{"v1.36.3": "1.36", "1.36.0": "1.36", "1.36": "1.36"} {
		if got := minorVersion(in); got != want {
			t.Errorf("minorVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestComponentsDefaultToAll(t *testing.T) {
	o := Options{}
	o.defaults()
	if !o.Components.Has(ControlPlane) || !o.Components.Has(DynamoDB) || !o.Components.Has(AWS) {
		t.Fatalf("zero Components = %b, want all", o.Components)
	}
	if (Options{Components: DynamoDB}).Components.Has(ControlPlane) {
		t.Fatal("DynamoDB-only includes the control plane")
	}
}

// Env only names the components that run.
func TestEnvOnlyForStartedComponents(t *testing.T) {
	c := &Cloud{Region: "eu-west-1", ClusterName: "c1", DynamoDBEndpoint: "http://127.0.0.1:1"}
	env := strings.Join(c.Env(), "\n")
	for _, want := range []string{"AWS_REGION=eu-west-1", "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1", "NODEWRIGHT_CLUSTER_NAME=c1", "AWS_ACCESS_KEY_ID=" + AccessKeyID} {
		if !strings.Contains(env, want+"\n") && !strings.HasSuffix(env, want) {
			t.Errorf("env lacks %s:\n%s", want, env)
		}
	}
	for _, absent := range []string{"AWS_ENDPOINT_URL=", "KUBECONFIG="} {
		if strings.Contains(env, "\n"+absent) || strings.HasPrefix(env, absent) {
			t.Errorf("env has %s without that component:\n%s", absent, env)
		}
	}
}

func TestStateLifecycle(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	if _, err := LoadState(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("LoadState with no file: %v, want ErrNotRunning", err)
	}
	c := &Cloud{Region: "us-west-2", ClusterName: "local", Kubeconfig: "/tmp/kc"}
	if _, err := SaveState(c, Extras{}); err != nil {
		t.Fatal(err)
	}
	st, err := LoadState()
	if err != nil {
		t.Fatal(err)
	}
	if st.PID != os.Getpid() || st.Kubeconfig != "/tmp/kc" || len(st.Env) == 0 {
		t.Fatalf("state %+v", st)
	}
	// Saving again from the owner is fine (idempotent).
	if _, err := SaveState(c, Extras{}); err != nil {
		t.Fatalf("re-save by owner: %v", err)
	}
	RemoveState()
	if _, err := LoadState(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("after RemoveState: %v", err)
	}
}

// A state file left by a dead owner is stale, and another live owner's
// state blocks a second `up`.
func TestStateStaleAndForeignOwners(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	path, err := StatePath()
	if err != nil {
		t.Fatal(err)
	}
	write := func(pid int) {
		os.MkdirAll(strings.TrimSuffix(path, "/state.json"), 0o755)
		os.WriteFile(path, []byte(`{"pid": `+strconv.Itoa(pid)+`, "env": ["A=b"]}`), 0o600)
	}

	dead := exec.Command("/bin/true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	write(dead.Process.Pid)
	if _, err := LoadState(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("dead owner: %v, want ErrNotRunning", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("stale state file not removed")
	}

	other := exec.Command("/bin/sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { other.Wait(); close(exited) }()
	write(other.Process.Pid)
	if _, err := SaveState(&Cloud{}, Extras{}); err == nil || !strings.Contains(err.Error(), "already running") {
		t.Fatalf("SaveState over a live foreign owner: %v", err)
	}
	st, err := LoadState()
	if err != nil {
		t.Fatal(err)
	}
	// `local down`: the owner gets SIGTERM and the state file goes away.
	if err := st.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Fatal("owner still running after Stop")
	}
	if _, err := LoadState(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("after Stop: %v", err)
	}
}

// Forbidden leaves out the writes RBAC refuses the shadow-mode identity
// (its job) and keeps everything else it refuses.
func TestShadowWrite(t *testing.T) {
	for line, want := range map[string]bool{
		shadowUser + " patch nodes /karp-a":                         true,
		shadowUser + " create pods/eviction ns/web-1":               true,
		shadowUser + " list secrets default/":                       false,
		controllerUser + " create pods/eviction ns/web-1":           false,
		"system:serviceaccount:x:" + shadowUser + " patch nodes /n": false,
	} {
		if got := shadowWrite(line); got != want {
			t.Errorf("shadowWrite(%q) = %v, want %v", line, got, want)
		}
	}
}
