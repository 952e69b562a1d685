package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// The termination workflow killed between every two of its external calls
// (DynamoDB, EC2, SQS, the API server) and run again by a new process
// still ends with the claim finalized, its one instance terminated, its
// Node gone, and the node's pod evicted, never deleted: no crash point
// makes it skip the drain, launch or leak an instance.
func TestTerminationSurvivesACrashAtEveryCall(t *testing.T) {
	e := newEnv(t)
	cloudtest.CrashSweep(t, 8, func(t *testing.T, cr *cloudtest.Crasher) {
		e.t = t
		e.terminateThroughCrash(cr, fmt.Sprintf("crash-%d", cr.At))
	})
}

// terminateThroughCrash marks a registered claim with a running pod for
// deletion, reconciles it through cr until the process "dies", finishes
// with a fresh controller, and checks the outcome.
func (e *env) terminateThroughCrash(cr *cloudtest.Crasher, name string) {
	e.t.Helper()
	normal := e.newController(e.deps())
	cl := e.launchClaim(name)
	cl, node := e.initialized(normal, cl.Name)
	pod := e.runningPod(name+"-web", node.Name, nil)
	e.mark(cl.Name, apis.DeletionReasonManual)

	crashing := e.newController(e.crashDeps(cr))
	for i := 0; i < 50 && !cr.Crashed(); i++ {
		out, err := crashing.Reconcile(e.ctx, cl.Name)
		if err == nil && (out.Done || e.gone(cl.Name)) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.reconcileUntil(normal, cl.Name, "finalized after the crash", func(_ lifecycle.Outcome, c *apis.NodeClaim) bool { return c == nil })

	id := cl.Status.InstanceID
	if s := e.instanceState(id); s != "shutting-down" && s != "terminated" {
		e.t.Errorf("instance %s is %s after the claim was finalized", id, s)
	}
	if n := e.instancesTagged(cl.Name); n != 1 {
		e.t.Errorf("%d instances carry claim %s, want exactly 1", n, cl.Name)
	}
	if e.nodeExists(node.Name) {
		e.t.Errorf("node %s outlived its claim", node.Name)
	}
	e.assertEvictedNotDeleted(pod.Name)
}

// crashDeps are deps() over clients whose every HTTP call counts against cr.
func (e *env) crashDeps(cr *cloudtest.Crasher) lifecycle.Deps {
	e.t.Helper()
	return e.depsOver(e.connect(e.st.Table(), cr.REST(e.cloud.ControllerREST), config.WithHTTPClient(cr.HTTPClient())))
}

// instancesTagged counts the instances ever launched for a claim.
func (e *env) instancesTagged(claim string) int {
	n := 0
	for _, inst := range e.cloud.AWS.EC2().Instances() {
		for _, tag := range inst.Tags {
			if tag.Key != nil && *tag.Key == nwaws.TagNodeClaim && tag.Value != nil && *tag.Value == claim {
				n++
			}
		}
	}
	return n
}

// assertEvictedNotDeleted checks, in the API server's audit log, that the
// controllers removed the pod through the Eviction API (which honours
// PDBs) and never deleted it directly.
func (e *env) assertEvictedNotDeleted(pod string) {
	e.t.Helper()
	var evicted bool
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		audit, err := e.cloud.Plane.Audit()
		if err != nil {
			return false, err
		}
		for _, ev := range audit {
			if ev.Namespace != e.ns || ev.Name != pod || ev.Resource != "pods" {
				continue
			}
			if ev.Verb == "delete" && ev.Subresource == "" {
				e.t.Errorf("the controllers deleted pod %s instead of evicting it (%s)", pod, ev)
				return true, nil
			}
			if ev.Verb == "create" && ev.Subresource == "eviction" && ev.Code < 300 {
				evicted = true
			}
		}
		return evicted, nil
	})
	if err != nil && !evicted {
		e.t.Errorf("no successful eviction of pod %s in the audit log: %v", pod, err)
	}
}
