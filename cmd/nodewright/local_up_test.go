package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// A bad configuration stops `local up --config` with FILE:LINE: FIELD
// before anything starts (no state is recorded, no cloud is built).
func TestLocalUpBadConfigFailsFirst(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	t.Setenv("NODEWRIGHT_LOCAL_STATE", state)
	dir := t.TempDir()
	bad := "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: broken\nspec:\n  disruption:\n    consolidationPolicy: Sometimes\n"
	if err := os.WriteFile(filepath.Join(dir, "pools.yaml"), []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	start := time.Now()
	code := execute(context.Background(), newRootCmd(), []string{"local", "up", "--config", dir}, &out, &errOut)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailure, errOut.String())
	}
	if !strings.Contains(errOut.String(), "pools.yaml:7: spec.disruption.consolidationPolicy") {
		t.Errorf("stderr lacks FILE:LINE: FIELD:\n%s", errOut.String())
	}
	if _, err := os.Stat(state); err == nil || time.Since(start) > 10*time.Second {
		t.Errorf("local up went on after a bad configuration")
	}
}

// upProcess is a `nodewright local up --config` run as its own process, as
// a person runs it, with its output collected.
type upProcess struct {
	cmd  *exec.Cmd
	done chan error
	out  cloudtest.SyncBuffer
}

func (u *upProcess) lines() []string {
	return strings.Split(strings.TrimRight(u.out.String(), "\n"), "\n")
}

// buildCLI builds this command into a temporary directory.
func buildCLI(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "nodewright")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The done-when test of `local up --config`: several NodePools, a mixed
// workload applied with the kubectl built with the control plane, every pod
// Running on nodes nodewright launched (the real kube-scheduler placing
// them), a spot interruption, scale to zero until every instance is
// terminated, and `local down` leaving no process or listening port.
func TestLocalUpConfigEndToEnd(t *testing.T) {
	localcloud.SkipIfShort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute) // a cold control-plane build
	defer cancel()
	bin := buildCLI(t)
	t.Setenv("NODEWRIGHT_LOCAL_STATE", filepath.Join(t.TempDir(), "state.json"))
	up := startUp(ctx, t, bin, "--config", "testdata/localup", "--interval", "2s", "-v")
	st := waitState(ctx, t, up)
	if st.ClusterName != "local-e2e" || st.Region != "us-west-2" || st.Control == "" || st.BinDir == "" {
		t.Fatalf("state %+v: want cluster local-e2e in us-west-2 (from the config), a control endpoint and kubectl", st)
	}
	env := append(os.Environ(), st.Env...)
	env = append(env, "PATH="+st.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	run := func(name string, args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, name, args...)
		c.Env = env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kc := kubeClient(t, st.Kubeconfig)
	run("kubectl", "apply", "-f", "testdata/localup-workload.yaml")
	waitWorkload(ctx, t, kc, 13)

	checkVolumes(ctx, t, kc)

	// The fault buttons reach the running up.
	if out := run(bin, "local", "price", "m6i.large", "us-west-2a", "0.02"); !strings.Contains(out, "$0.0200/h") {
		t.Errorf("local price: %s", out)
	}
	if spot := nodeOf(ctx, t, kc, "spot"); spot != "" {
		run(bin, "local", "spot-interrupt", spot)
		waitNodeGone(ctx, t, kc, spot)
		waitWorkload(ctx, t, kc, 13)
	}
	// `get nodeclaims` finds the local table with no flags.
	if out := run(bin, "get", "nodeclaims"); !strings.Contains(out, "general-") || !strings.Contains(out, "steady-") {
		t.Errorf("get nodeclaims lacks the pools' claims:\n%s", out)
	}

	run("kubectl", "-n", "e2e", "scale", "deployment,statefulset", "--all", "--replicas=0")
	run("kubectl", "-n", "e2e", "delete", "job", "batch")
	waitLine(ctx, t, up, "pending pods 0 | nodes none | instances 0 | $0.0000/h", 6*time.Minute)

	endpoints := endpointsOf(t, st)
	run(bin, "local", "down")
	select {
	case <-up.done:
	case <-time.After(time.Minute):
		t.Fatal("local up still runs after local down")
	}
	checkNothingLeft(t, st, endpoints)
}

func startUp(ctx context.Context, t *testing.T, bin string, args ...string) *upProcess {
	t.Helper()
	u := &upProcess{cmd: exec.CommandContext(ctx, bin, append([]string{"local", "up"}, args...)...), done: make(chan error, 1)}
	u.cmd.Stdout, u.cmd.Stderr = &u.out, &u.out
	if err := u.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { u.done <- u.cmd.Wait() }()
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("local up's output:\n%s", u.out.String())
		}
		if u.cmd.ProcessState == nil {
			_ = u.cmd.Process.Signal(os.Interrupt)
			select {
			case <-u.done:
			case <-time.After(time.Minute):
				_ = u.cmd.Process.Kill()
			}
		}
	})
	return u
}

func waitState(ctx context.Context, t *testing.T, u *upProcess) *localcloud.State {
	t.Helper()
	for {
		if st, err := localcloud.LoadState(); err == nil {
			return st
		}
		select {
		case err := <-u.done:
			t.Fatalf("local up exited early: %v", err)
		case <-ctx.Done():
			t.Fatal("local up never recorded its state")
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func kubeClient(t *testing.T, kubeconfig string) kubernetes.Interface {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(cfg)
}

// waitWorkload waits until every pod of namespace e2e runs (Job pods may
// have completed) on a node of nodewright's NodePools, and at least atLeast
// do (the Deployments' replicas; the Job's pods come and go).
func waitWorkload(ctx context.Context, t *testing.T, kc kubernetes.Interface, atLeast int) {
	t.Helper()
	poll(ctx, t, 6*time.Minute, fmt.Sprintf("every e2e pod (at least %d) Running on nodewright nodes", atLeast), func() (bool, string) {
		pods, err := kc.CoreV1().Pods("e2e").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		ok, live := 0, 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
				continue
			}
			live++
			if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning && p.Status.Phase != corev1.PodSucceeded {
				continue
			}
			node, err := kc.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
			if err == nil && node.Labels[apis.NodePoolLabelKey] != "" {
				ok++
			}
		}
		return ok == live && ok >= atLeast, fmt.Sprintf("%d of %d", ok, live)
	})
}

// checkVolumes: each StatefulSet pod's volume was provisioned in the zone
// of the node it runs on, with that zone as its node affinity.
func checkVolumes(ctx context.Context, t *testing.T, kc kubernetes.Interface) {
	t.Helper()
	for i := range 2 {
		pod, err := kc.CoreV1().Pods("e2e").Get(ctx, fmt.Sprintf("db-%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node, err := kc.CoreV1().Nodes().Get(ctx, pod.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pvc, err := kc.CoreV1().PersistentVolumeClaims("e2e").Get(ctx, fmt.Sprintf("data-db-%d", i), metav1.GetOptions{})
		if err != nil || pvc.Spec.VolumeName == "" {
			t.Fatalf("claim data-db-%d unbound: %v", i, err)
		}
		pv, err := kc.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		zone := node.Labels[corev1.LabelTopologyZone]
		terms := pv.Spec.NodeAffinity.Required.NodeSelectorTerms
		if len(terms) != 1 || terms[0].MatchExpressions[0].Values[0] != zone {
			t.Errorf("volume %s of db-%d: affinity %+v, want zone %s", pv.Name, i, terms, zone)
		}
	}
}

func nodeOf(ctx context.Context, t *testing.T, kc kubernetes.Interface, capacityType string) string {
	t.Helper()
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apis.CapacityTypeLabelKey + "=" + capacityType})
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes.Items) == 0 {
		return ""
	}
	return nodes.Items[0].Name
}

func waitNodeGone(ctx context.Context, t *testing.T, kc kubernetes.Interface, node string) {
	t.Helper()
	poll(ctx, t, 5*time.Minute, "node "+node+" gone after its spot interruption", func() (bool, string) {
		_, err := kc.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		return err != nil, fmt.Sprint(err)
	})
}

// waitLine waits for a line of up's output ending with suffix.
func waitLine(ctx context.Context, t *testing.T, u *upProcess, suffix string, limit time.Duration) {
	t.Helper()
	poll(ctx, t, limit, "a status line "+suffix, func() (bool, string) {
		lines := u.lines()
		for i := len(lines) - 1; i >= 0 && i >= len(lines)-5; i-- {
			if strings.HasSuffix(lines[i], suffix) {
				return true, ""
			}
		}
		return false, lines[len(lines)-1]
	})
}

func poll(ctx context.Context, t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("timed out waiting for %s (last: %s)", what, last)
		}
		time.Sleep(time.Second)
	}
}

// checkNothingLeft: every process the local cloud started has exited and
// none of its endpoints still listens.
func checkNothingLeft(t *testing.T, st *localcloud.State, endpoints []string) {
	t.Helper()
	for _, pid := range st.ChildPIDs {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
			if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); !strings.Contains(string(b), ") Z ") {
				t.Errorf("child process %d still runs", pid)
			}
		}
	}
	for _, e := range endpoints {
		u, err := url.Parse(e)
		if err != nil || u.Host == "" {
			continue
		}
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still listens after local down", e)
		}
	}
}

// endpointsOf lists the URLs the running local cloud serves.
func endpointsOf(t *testing.T, st *localcloud.State) []string {
	t.Helper()
	endpoints := []string{st.Control}
	for _, kv := range st.Env {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "AWS_ENDPOINT_URL") {
			endpoints = append(endpoints, v)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", st.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	return append(endpoints, cfg.Host)
}
