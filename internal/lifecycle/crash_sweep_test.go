package lifecycle_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
	"github.com/nodewright/nodewright/internal/termination"
)

// crashedAt names the call the process died after, for messages.
func crashedAt(cr *cloudtest.Crasher) string {
	if calls := cr.Calls(); cr.Crashed() && cr.At >= 1 && cr.At <= len(calls) {
		return calls[cr.At-1]
	}
	return "(none: the run finished first)"
}

// drive reconciles the claim with c until done holds for the stored claim
// (nil once it is gone), the process crashes, or a minute passes; between
// runs it calls agent (what others do meanwhile; may be nil). It reports
// whether done was reached.
func (e *env) drive(c *lifecycle.Controller, cr *cloudtest.Crasher, name string, done func(*apis.NodeClaim) bool, agent func(*apis.NodeClaim)) bool {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	var (
		out lifecycle.Outcome
		err error
		cl  *apis.NodeClaim
	)
	for time.Now().Before(deadline) {
		out, err = c.Reconcile(e.ctx, name)
		if cr != nil && cr.Crashed() {
			return false
		}
		var gerr error
		if cl, gerr = e.st.GetNodeClaim(e.ctx, name); gerr != nil {
			cl = nil
		}
		if err == nil && done(cl) {
			return true
		}
		if agent != nil && cl != nil {
			agent(cl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var conds []string
	if ts, err := e.st.GetTombstone(e.ctx, name); cl == nil && err == nil {
		cl = ts.Claim
		conds = append(conds, "tombstoned: "+ts.Claim.DeletionReason())
	}
	if cl != nil {
		for _, c := range cl.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	e.t.Fatalf("claim %s did not converge within a minute: last outcome %+v, error %v, conditions %v", name, out, err, conds)
	return false
}

// Registration and initialization killed between every two external calls
// and finished by a fresh process: the claim ends Initialized with its one
// instance, and its Node carries the registered label and the pool's
// labels and no unregistered taint.
func TestRegistrationSurvivesACrashAtEveryCall(t *testing.T) {
	// consolidateAfter Never: an empty node that waits for a re-run must
	// not be taken away by the WhenEmpty pool meanwhile.
	e := newEnv(t, withPool(func(p *apistest.Pool) { p.ConsolidateAfter = "Never" }))
	cloudtest.CrashSweep(t, 5, func(t *testing.T, cr *cloudtest.Crasher) {
		id := fmt.Sprintf("k%d", cr.At)
		e.t = t
		cl := e.launchClaim("reg-" + id)
		// The process starts once the kubelet has registered its Node, so
		// the sweep's calls are the registration's, not waiting for it.
		cloudtest.Eventually(t, "node registered", 30*time.Second, func() (bool, string) {
			n, err := e.kc.ClaimNode(e.ctx, cl)
			return err == nil && n != nil, fmt.Sprint(err)
		})
		// The node agent removes its startup taint once the claim is
		// registered: its call, not the process's.
		agent := func(cl *apis.NodeClaim) {
			if cl.IsTrue(apis.ConditionRegistered) && !cl.IsTrue(apis.ConditionInitialized) {
				_, _ = e.kc.RemoveTaints(e.ctx, cl.Status.NodeName, "example.com/agent", "")
			}
		}
		initialized := func(cl *apis.NodeClaim) bool { return cl != nil && cl.IsTrue(apis.ConditionInitialized) }
		crashing := e.newController(e.crashDeps(cr))
		e.drive(crashing, cr, cl.Name, initialized, agent)
		at := crashedAt(cr)
		e.drive(e.newController(e.deps()), nil, cl.Name, initialized, agent)

		got, err := e.st.GetNodeClaim(e.ctx, cl.Name)
		if err != nil {
			t.Fatalf("crash after %s: %v", at, err)
		}
		if n := e.instancesTagged(cl.Name); n != 1 {
			t.Errorf("crash after %s: %d instances carry claim %s, want 1", at, n, cl.Name)
		}
		if s := e.instanceState(got.Status.InstanceID); s != "running" {
			t.Errorf("crash after %s: instance %s is %s", at, got.Status.InstanceID, s)
		}
		n, err := e.cs.CoreV1().Nodes().Get(e.ctx, got.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("crash after %s: node: %v", at, err)
		}
		if hasTaint(n, apis.UnregisteredTaintKey) || n.Labels[apis.NodeRegisteredLabel] != "true" || n.Labels["team"] != "payments" {
			t.Errorf("crash after %s: node not registered: taints %v labels %v", at, n.Spec.Taints, n.Labels)
		}
	})
}

// The termination workflow killed between every two external calls while
// it drains a node whose pods include one guarded by a PodDisruptionBudget
// that allows no disruption (minAvailable = replicas = 1). Fresh processes
// carry on: the drain stops at the guarded pod, which is never evicted and
// whose instance keeps running while its budget forbids it; once the
// budget allows it the drain finishes, the Node is deleted only after every
// pod's successful eviction (API server audit log, in order), no pod is
// deleted directly, the one instance is terminated and the claim
// tombstoned.
func TestDrainHonoursPDBThroughCrashes(t *testing.T) {
	e := newEnv(t)
	cloudtest.CrashSweep(t, 5, func(t *testing.T, cr *cloudtest.Crasher) {
		k := fmt.Sprintf("k%d", cr.At)
		e.t = t
		cl := e.launchClaim("pdb-" + k)
		cl, node := e.initialized(e.newController(e.deps()), cl.Name)
		id := cl.Status.InstanceID
		web1, web2, guarded := k+"-web-1", k+"-web-2", k+"-guarded"
		pods := []string{web1, web2, guarded}
		e.runningPod(web1, node.Name, nil)
		e.runningPod(web2, node.Name, nil)
		e.runningPod(guarded, node.Name, func(p *corev1.Pod) { p.Labels = map[string]string{"app": guarded} })
		e.guard(t, guarded, 1)

		strict := true
		blocked := func(cl *apis.NodeClaim) bool {
			if cl == nil {
				return true
			}
			d := cl.Condition(termination.ConditionDrained)
			return d != nil && strings.Contains(d.Message, "blocked by PodDisruptionBudgets")
		}
		gone := func(cl *apis.NodeClaim) bool { return cl == nil }
		// While the drain waits for the guarded pod, that pod and the
		// instance still run; then its budget allows one disruption.
		relax := func(at string) {
			if p, err := e.cs.CoreV1().Pods(e.ns).Get(e.ctx, guarded, metav1.GetOptions{}); err != nil || p.DeletionTimestamp != nil {
				t.Errorf("crash after %s: guarded pod evicted while its PDB forbids it (err %v)", at, err)
			}
			if s := e.instanceState(id); s != "running" {
				t.Errorf("crash after %s: instance %s is %s while the drain is blocked", at, id, s)
			}
			strict = false
			got, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Get(e.ctx, guarded, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			zero := intstr.FromInt32(0)
			got.Spec.MinAvailable = &zero
			if _, err := e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Update(e.ctx, got, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			waitPDB(t, e, guarded, 1, 1)
		}
		// The process: decide the deletion (as disruption does), drain
		// until the budget blocks and, once it allows, finish.
		process := func(d lifecycle.Deps, cr *cloudtest.Crasher, at string) {
			c := e.newController(d)
			if strict {
				if _, _, err := termination.Mark(e.ctx, d.Store, cl.Name, apis.DeletionReasonManual, "crash sweep", e.clock.Now()); err != nil && (cr == nil || !cr.Crashed()) {
					t.Fatalf("mark: %v", err)
				}
				if cr != nil && cr.Crashed() || !e.drive(c, cr, cl.Name, blocked, nil) {
					return
				}
				relax(at)
			}
			e.drive(c, cr, cl.Name, gone, nil)
		}
		process(e.crashDeps(cr), cr, "(none yet)")
		at := crashedAt(cr)
		process(e.deps(), nil, at)

		if s := e.instanceState(id); s != "shutting-down" && s != "terminated" {
			t.Errorf("crash after %s: instance %s is %s", at, id, s)
		}
		if n := e.instancesTagged(cl.Name); n != 1 {
			t.Errorf("crash after %s: %d instances carry claim %s, want 1", at, n, cl.Name)
		}
		if e.nodeExists(node.Name) {
			t.Errorf("crash after %s: node %s left behind", at, node.Name)
		}
		if _, err := e.st.GetTombstone(e.ctx, cl.Name); err != nil {
			t.Errorf("crash after %s: no tombstone: %v", at, err)
		}
		e.assertEvictedBeforeNodeDeleted(at, node.Name, pods)
	})
}

// assertEvictedBeforeNodeDeleted reads the API server's audit log (the
// controllers' requests, in order): no pod of the test is deleted directly,
// and each of pods has a successful eviction before the Node's deletion.
func (e *env) assertEvictedBeforeNodeDeleted(at, node string, pods []string) {
	e.t.Helper()
	// The audit log is written in batches: wait for the Node's deletion.
	var audit []kubeplane.AuditEvent
	deleted := func(ev kubeplane.AuditEvent) bool {
		return ev.Resource == "nodes" && ev.Name == node && ev.Verb == "delete" && ev.Code < 300
	}
	cloudtest.Eventually(e.t, "node deletion in the audit log", 15*time.Second, func() (bool, string) {
		var err error
		if audit, err = e.cloud.Plane.Audit(); err != nil {
			e.t.Fatal(err)
		}
		return slices.ContainsFunc(audit, deleted), "not yet"
	})
	evicted := map[string]bool{}
	for _, ev := range audit {
		switch {
		case deleted(ev):
			for _, p := range pods {
				if !evicted[p] {
					e.t.Errorf("crash after %s: node %s deleted before pod %s was evicted", at, node, p)
				}
			}
		case ev.Namespace != e.ns || ev.Resource != "pods":
		case ev.Verb == "delete" && ev.Subresource == "":
			e.t.Errorf("crash after %s: the controllers deleted pod %s instead of evicting it (%s)", at, ev.Name, ev)
		case ev.Verb == "create" && ev.Subresource == "eviction" && ev.Code < 300:
			evicted[ev.Name] = true
		}
	}
}
