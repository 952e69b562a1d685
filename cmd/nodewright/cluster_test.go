package main

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
	"github.com/nodewright/nodewright/internal/simulation"
)

// A cluster running Karpenter: its CRDs and configuration, one m5.large
// node running a small pod, and two pods too big for it that the scheduler
// marks Unschedulable. simulate plans for them, --repack prices the node
// against a from-scratch plan, import writes files validate accepts; all as
// a user who can only read.
func TestSimulateAndImportReadALiveClusterReadOnly(t *testing.T) {
	ctx := integration(t, "runs a real control plane", 10*time.Minute)
	plane, err := kubeplane.Start(ctx, kubeplane.Options{
		Users:       []kubeplane.User{{Name: "reader", Groups: []string{readerGroup}}},
		AuditGroups: []string{readerGroup},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plane.Close() })
	admin := setupCluster(ctx, t, plane)
	kubeconfig := readerKubeconfig(t, plane)

	t.Run("simulate", func(t *testing.T) {
		plan, stderr := simulateJSON(ctx, t, kubeconfig)
		// Every field of the cluster's objects is honoured (the static
		// pool's Balanced policy too): nothing to warn about.
		if strings.Contains(stderr, "warning:") {
			t.Errorf("a warning:\n%s", stderr)
		}
		var placed []string
		for _, c := range plan.NodeClaims {
			if c.NodePool != "default" {
				t.Errorf("claim %s in NodePool %s, want default (static is tainted)", c.Name, c.NodePool)
			}
			placed = append(placed, c.Pods...)
		}
		slices.Sort(placed)
		if want := []string{"work/big-0", "work/big-1"}; !slices.Equal(placed, want) || len(plan.Unschedulable) != 0 || plan.CurrentFleet != nil {
			t.Fatalf("pods on new claims %v, unschedulable %v, fleet %v; want %v on new claims only", placed, plan.Unschedulable, plan.CurrentFleet, want)
		}
	})
	t.Run("repack", func(t *testing.T) {
		out := runRoot(ctx, t, "simulate", "--kubeconfig", kubeconfig, "--context", "reader", "--repack")
		for _, want := range []string{"CURRENT NODE", "current fleet: 1 node(s), $0.0960/hour", "from-scratch plan: $",
			"note: the current nodes leave 2 pod(s) pending"} {
			if !strings.Contains(out, want) {
				t.Errorf("--repack output lacks %q:\n%s", want, out)
			}
		}
		if !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
			return slices.Equal(strings.Fields(l), []string{"existing", "m5.large", "on-demand", "us-east-1a", "0.0960", "1"})
		}) {
			t.Errorf("--repack output lacks the node existing (m5.large, $0.0960/h, 1 pod):\n%s", out)
		}
		if !strings.Contains(out, "3 pod(s) on new nodes, 0 on existing nodes") {
			t.Errorf("--repack should place the running pod and both pending ones on new nodes:\n%s", out)
		}
	})
	t.Run("import", func(t *testing.T) { testImport(ctx, t, kubeconfig) })
	t.Run("booting claim", func(t *testing.T) {
		apply(ctx, t, admin, "nodeclaim.yaml")
		plan, _ := simulateJSON(ctx, t, kubeconfig)
		if len(plan.NodeClaims) != 0 || len(plan.ExistingNodes) != 1 || plan.ExistingNodes[0].Name != "default-booting" ||
			!slices.Equal(slices.Sorted(slices.Values(plan.ExistingNodes[0].Pods)), []string{"work/big-0", "work/big-1"}) {
			t.Fatalf("new claims %v, existing nodes %v: want both pending pods on Karpenter's booting claim", plan.NodeClaims, plan.ExistingNodes)
		}
	})

	assertOnlyReads(t, plane)
}

func simulateJSON(ctx context.Context, t *testing.T, kubeconfig string) (simulation.Output, string) {
	t.Helper()
	out, stderr, err := runRootErr(ctx, "simulate", "--kubeconfig", kubeconfig, "--context", "reader", "-o", "json")
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, stderr)
	}
	var plan simulation.Output
	if err := json.Unmarshal([]byte(out), &plan); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return plan, stderr
}

func runRoot(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := runRootErr(ctx, args...)
	if err != nil {
		t.Fatalf("nodewright %s: %v\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func runRootErr(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	cmd := newRootCmd()
	var out, errb bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	err = cmd.ExecuteContext(ctx)
	return out.String(), errb.String(), err
}
