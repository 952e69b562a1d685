package kubeplane_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/localcloud/internal/proc"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// plane is shared by the package's tests: one control plane per test binary,
// a fresh namespace per test.
var plane *kubeplane.Plane

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	p, err := kubeplane.Start(ctx, kubeplane.Options{Logger: logger})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeplane tests: start control plane:", err)
		os.Exit(1)
	}
	plane = p
	pids := p.PIDs()
	code := m.Run()
	if err := p.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "kubeplane tests: close:", err)
		code = 1
	}
	// Nothing may outlive the harness.
	for _, pid := range pids {
		if proc.Alive(pid) {
			fmt.Fprintf(os.Stderr, "kubeplane tests: process %d still exists after Close\n", pid)
			code = 1
		}
	}
	os.Exit(code)
}

func needPlane(t *testing.T) (kubernetes.Interface, context.Context) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs a real control plane (skipped in -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return plane.Client(), ctx
}

func TestAPIServerReady(t *testing.T) {
	client, ctx := needPlane(t)
	body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	if strings.TrimSpace(string(body)) != "ok" {
		t.Fatalf("/readyz = %q, want ok", body)
	}
	v, err := client.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("server version: %v", err)
	}
	if v.GitVersion != kubeplane.KubeVersion {
		t.Fatalf("server version %s, want %s (version ldflags missing?)", v.GitVersion, kubeplane.KubeVersion)
	}
	// The kubeconfig written for people and other tools works on its own.
	if _, err := os.Stat(plane.Kubeconfig); err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
}

func TestKWOKNodeReadyAndScheduledPodRunning(t *testing.T) {
	client, ctx := needPlane(t)
	ns := plane.NewNamespace(t)
	node := createNode(ctx, t, client, "kwok-ready-"+ns)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: corev1.PodSpec{
			// Left to the real scheduler, steered to this test's node.
			NodeSelector: map[string]string{corev1.LabelHostname: node},
			Containers: []corev1.Container{{Name: "web", Image: "nginx", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: mustQ("500m")},
			}}},
		},
	}
	if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	got := kubeplane.WaitFor(ctx, t, "pod web Running on "+node, func() (*corev1.Pod, bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		return p, err == nil && p.Status.Phase == corev1.PodRunning, err
	})
	if got.Spec.NodeName != node {
		t.Fatalf("pod scheduled to %q, want %q", got.Spec.NodeName, node)
	}
	if !kubeplane.PodReady(got) {
		t.Fatalf("pod Running but not Ready: %+v", got.Status.Conditions)
	}
}

func TestPDBEvictionRefusedWith429(t *testing.T) {
	client, ctx := needPlane(t)
	ns := plane.NewNamespace(t)
	node := createNode(ctx, t, client, "kwok-pdb-"+ns)

	for i := range 2 {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("db-%d", i), Namespace: ns, Labels: map[string]string{"app": "db"}},
			Spec: corev1.PodSpec{
				NodeName:   node,
				Containers: []corev1.Container{{Name: "db", Image: "postgres"}},
			},
		}
		if _, err := client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create pod: %v", err)
		}
	}
	minAvailable := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		},
	}
	if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pdb: %v", err)
	}
	// The eviction check trusts the status the disruption controller writes.
	kubeplane.WaitFor(ctx, t, "PDB status for 2 running pods", func() (*policyv1.PodDisruptionBudget, bool, error) {
		p, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "db", metav1.GetOptions{})
		return p, err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 2 && p.Status.DesiredHealthy == 2, err
	})

	err := evict(ctx, client, ns, "db-0")
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evict db-0 under minAvailable=2: got %v, want 429 TooManyRequests", err)
	}
	if !strings.Contains(err.Error(), "disruption budget") {
		t.Errorf("429 without the budget reason: %v", err)
	}
	if _, err := client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{}); err != nil {
		t.Fatalf("db-0 gone after a refused eviction: %v", err)
	}

	// Relax the budget: the same eviction now goes through and KWOK removes the pod.
	kubeplane.WaitFor(ctx, t, "relaxed PDB observed", func() (*policyv1.PodDisruptionBudget, bool, error) {
		p, err := client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return nil, false, err
		}
		if p.Spec.MinAvailable.IntValue() != 1 {
			one := intstr.FromInt32(1)
			p.Spec.MinAvailable = &one
			if p, err = client.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
				return nil, false, nil // conflict with the controller's status write; retry
			}
		}
		return p, p.Status.ObservedGeneration == p.Generation && p.Status.DisruptionsAllowed == 1, nil
	})
	if err := evict(ctx, client, ns, "db-0"); err != nil {
		t.Fatalf("evict db-0 under minAvailable=1: %v", err)
	}
	kubeplane.WaitFor(ctx, t, "evicted pod deleted", func() (struct{}, bool, error) {
		_, err := client.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return struct{}{}, true, nil
		}
		return struct{}{}, false, err
	})
}

// evict posts a policy/v1 Eviction once: client-go's typed Evict would retry
// a 429 ten times, honouring Retry-After.
func evict(ctx context.Context, client kubernetes.Interface, ns, name string) error {
	ev := &policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
	}
	return client.CoreV1().RESTClient().Post().
		Namespace(ns).Resource("pods").Name(name).SubResource("eviction").
		MaxRetries(0).Body(ev).Do(ctx).Error()
}

func createNode(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	if _, err := client.CoreV1().Nodes().Create(ctx, kubeplane.FakeNode(name, nil, nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create node: %v", err)
	}
	t.Cleanup(func() {
		_ = client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	n := kubeplane.WaitFor(ctx, t, "node "+name+" Ready", func() (*corev1.Node, bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return n, err == nil && kubeplane.NodeReady(n), err
	})
	if n.Status.Allocatable.Cpu().String() != "4" {
		t.Fatalf("node allocatable cpu %s, want the 4 it registered with", n.Status.Allocatable.Cpu())
	}
	return name
}

func mustQ(s string) resource.Quantity { return resource.MustParse(s) }

// A node whose machine ID and system UUID look like numbers (a simulated
// instance ID of digits only, or digits with one e) still becomes Ready:
// KWOK's stage writes them as strings.
func TestKWOKNodeWithNumericIDsReady(t *testing.T) {
	client, ctx := needPlane(t)
	ns := plane.NewNamespace(t)
	for i, id := range []string{"00752594602766902", "0012345e678901234"} {
		name := fmt.Sprintf("kwok-numeric-%d-%s", i, ns)
		n := kubeplane.FakeNode(name, nil, nil)
		n.Status.NodeInfo.MachineID, n.Status.NodeInfo.SystemUUID, n.Status.NodeInfo.BootID = id, id, id
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create node: %v", err)
		}
		t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
		got := kubeplane.WaitFor(ctx, t, "node "+name+" Ready", func() (*corev1.Node, bool, error) {
			n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			return n, err == nil && kubeplane.NodeReady(n), err
		})
		if got.Status.NodeInfo.MachineID != id {
			t.Fatalf("machine ID %q, want %q", got.Status.NodeInfo.MachineID, id)
		}
	}
}
