package interruption_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"

	"github.com/nodewright/nodewright/internal/app"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/settings"
)

// The interruption function killed between every two of its external calls
// while handling a spot warning, and the warning redelivered to a new
// process: the node is still replaced by exactly one new instance, drained
// within its PDB through evictions, and its claim and instance removed.
func TestSpotWarningSurvivesACrashAtEveryCall(t *testing.T) {
	cloudtest.CrashSweep(t, 8, spotThroughCrash)
}

func spotThroughCrash(t *testing.T, cr *cloudtest.Crasher) {
	// A failed run ends its output with this pool's instances and claims
	// (read before the harness's cleanup drops the table, printed after its
	// log dump), which is what a failure in CI leaves to go on.
	var launches []string
	t.Cleanup(func() {
		for _, l := range launches {
			t.Log(l)
		}
	})
	var start time.Time
	h := newHarness(t)
	t.Cleanup(func() {
		if t.Failed() {
			launches = h.launches(start)
		}
	})
	cl, node := h.deploy(2, 1)
	stopPDB := h.watchPDB()
	crashing := h.crashingHandler(cr)
	h.dead.Store(cr)
	h.handler.Store(crashing)
	start = time.Now()
	id := fmt.Sprintf("crash-%d", cr.At)
	if _, err := h.sim.SQS().Send(h.qName, spotWarning(id, cl.Status.InstanceID, h.cloud.Region), 0); err != nil {
		t.Fatal(err)
	}
	h.eventually("the crashing process handled the warning", 30*time.Second, func() (bool, string) {
		return len(h.handled(`"`+id+`"`)) > 0, "not yet"
	})
	// A new process takes the redelivery, once the dead one's provisioner
	// lease has expired (released here rather than waited for).
	if cr.Crashed() {
		cloudtest.ExpireLeases(h.ctx, t, h.store, provisioning.LeaseName)
	}
	h.setHandler(h.app)
	h.dead.Store(nil)
	h.waitRunningOn(2, node.Name)
	h.waitGone(cl, node.Name)
	stopPDB()
	if n := h.instancesSince(start); n != 1 {
		t.Errorf("%d replacement instances launched, want 1", n)
	}
	h.eventually("queue drained", 20*time.Second, h.queueEmpty)
	if h.dlqDepth() != 0 {
		t.Errorf("DLQ has %d messages", h.dlqDepth())
	}
	h.assertNoPodDeleted()
}

// crashingHandler is the interruption function of a process whose external
// calls all go through cr.
func (h *harness) crashingHandler(cr *cloudtest.Crasher) *interruption.Handler {
	h.t.Helper()
	s := settings.Settings{ClusterName: h.cloud.ClusterName, TableName: h.table, Owner: cloudtest.Owner(h.cloud, h.table), Rebalance: interruption.RebalanceIgnore,
		BatchIdle: 100 * time.Millisecond, BatchMax: 2 * time.Second, LogLevel: slog.LevelDebug}
	a, err := app.New(h.ctx, s, app.Options{Function: "interruption", Out: h.logs, KubeREST: cr.REST(h.cloud.ControllerREST), Config: h.cfg, HTTPClient: cr.HTTPClient(), AWSCredentials: h.stack.Controller})
	if err != nil {
		h.t.Fatal(err)
	}
	hd, err := a.InterruptionHandler()
	if err != nil {
		h.t.Fatal(err)
	}
	return hd
}

// instancesSince counts this pool's instances launched after t.
func (h *harness) instancesSince(t time.Time) int {
	n := 0
	for _, inst := range h.sim.EC2().Instances() {
		if inst.LaunchTime == nil || inst.LaunchTime.Before(t) {
			continue
		}
		for _, tg := range inst.Tags {
			if sdkaws.ToString(tg.Key) == nwaws.TagNodePool && sdkaws.ToString(tg.Value) == h.pool {
				n++
			}
		}
	}
	return n
}

// launches describes this pool's instances (launch time relative to the
// warning, state, claim tag) and the table's claims with their conditions.
func (h *harness) launches(start time.Time) []string {
	var out []string
	for _, inst := range h.sim.EC2().Instances() {
		tags := map[string]string{}
		for _, tg := range inst.Tags {
			tags[sdkaws.ToString(tg.Key)] = sdkaws.ToString(tg.Value)
		}
		if tags[nwaws.TagNodePool] == h.pool {
			out = append(out, fmt.Sprintf("instance %s launched %s after the warning, state %s, nodeclaim %s", sdkaws.ToString(inst.InstanceId),
				sdkaws.ToTime(inst.LaunchTime).Sub(start).Round(time.Millisecond), inst.State.Name, tags["karpenter.sh/nodeclaim"]))
		}
	}
	claims, err := h.store.ListNodeClaims(context.WithoutCancel(h.ctx))
	if err != nil {
		out = append(out, "list nodeclaims: "+err.Error())
	}
	for _, c := range claims {
		var conds []string
		for _, cd := range c.Status.Conditions {
			conds = append(conds, cd.Type+"="+string(cd.Status)+"("+cd.Reason+")")
		}
		out = append(out, fmt.Sprintf("nodeclaim %s instance %s deleting=%v conditions %s", c.Name, c.Status.InstanceID, c.Deleting(), strings.Join(conds, " ")))
	}
	return out
}

// assertNoPodDeleted checks the API server's audit log: the controllers
// removed the test's pods through evictions only (the instance was never
// reclaimed, so the spot exception does not apply).
func (h *harness) assertNoPodDeleted() {
	h.t.Helper()
	audit, err := h.cloud.Plane.Audit()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, ev := range audit {
		if ev.Namespace == h.ns && ev.Resource == "pods" && ev.Subresource == "" && ev.Verb == "delete" {
			h.t.Errorf("the controllers deleted a pod instead of evicting it: %s", ev)
		}
	}
}
