package provisioning_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/settings"
)

// The whole path through the real function handler: pending pods -> one
// NodeClaim -> CreateFleet -> the simulated kubelet registers the Node;
// a second invocation launches nothing; once the node is registered (the
// lifecycle removes karpenter.sh/unregistered) the pods run.
func TestProvisionerHandlerEndToEnd(t *testing.T) {
	h := newHarness(t, poolSpec{})
	h.sim.ResetCalls()
	pods := h.createPods("web", 3, "500m")

	a, err := app.New(h.ctx, settings.Settings{ClusterName: h.cloud.ClusterName, TableName: h.table, Owner: cloudtest.Owner(h.cloud, h.table), BatchIdle: 200 * time.Millisecond, BatchMax: 2 * time.Second},
		app.Options{Function: "provisioner", Out: h.logs, KubeREST: h.cloud.ControllerREST, Config: h.cfg, AWSCredentials: h.stack.Controller})
	if err != nil {
		t.Fatal(err)
	}
	handler, err := a.ProvisionerHandler()
	if err != nil {
		t.Fatal(err)
	}
	tick := json.RawMessage(`{"version":"0","id":"t1","detail-type":"Scheduled Event","source":"aws.events","time":"2026-11-22T00:00:00Z","detail":{}}`)
	out, err := handler.Handle(h.ctx, tick)
	if err != nil {
		t.Fatal(err)
	}
	res := out.(*provisioning.Result)
	if len(res.Launched) != 1 || res.Nominated < 3 {
		t.Fatalf("first run: %+v", res)
	}
	cls := h.claims()
	if len(cls) != 1 {
		t.Fatalf("want 1 claim, got %d", len(cls))
	}
	cl := cls[0]
	if n := len(h.fleetCalls(true)); n != 1 {
		t.Fatalf("want 1 successful CreateFleet, got %d", n)
	}
	h.checkOneInstancePerClaim()

	// The simulated kubelet registers the instance.
	var node *corev1.Node
	h.eventually("node registration", 30*time.Second, func() (bool, string) {
		nodes, err := h.cloud.KubeClient.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for i := range nodes.Items {
			if nodes.Items[i].Spec.ProviderID == cl.Status.ProviderID {
				node = &nodes.Items[i]
				return true, ""
			}
		}
		return false, "no node with providerID " + cl.Status.ProviderID
	})
	if node.Labels[apis.NodePoolLabelKey] != h.pool || node.Labels[catalog.LabelInstanceType] != cl.Labels[catalog.LabelInstanceType] ||
		node.Labels["nodewright.io/test"] != h.pool {
		t.Errorf("node labels %v", node.Labels)
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == apis.UnregisteredTaintKey }) {
		t.Errorf("node registered without %s: %v", apis.UnregisteredTaintKey, node.Spec.Taints)
	}

	// A nudge now (node registered, not yet initialized) launches nothing.
	nudge, _ := json.Marshal(map[string]any{"Records": []map[string]any{{
		"messageId": "n1", "eventSource": "aws:sqs",
		"body": fmt.Sprintf(`{"kind":"provision","subject":"%s/web-0","sentAt":%q}`, h.ns, time.Now().UTC().Format(time.RFC3339Nano)),
	}}})
	if _, err := handler.Handle(h.ctx, nudge); err != nil {
		t.Fatal(err)
	}
	if n := len(h.fleetCalls(false)); n != 1 || len(h.claims()) != 1 {
		t.Fatalf("second run launched: %d CreateFleet calls, %d claims", n, len(h.claims()))
	}

	// Nominated events reached the pods.
	evs, err := h.cloud.KubeClient.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: "reason=Nominated"})
	if err != nil {
		t.Fatal(err)
	}
	nominated := map[string]bool{}
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "nodeclaim/"+cl.Name) {
			nominated[e.InvolvedObject.Name] = true
		}
	}
	for _, p := range pods {
		if !nominated[p.Name] {
			t.Errorf("pod %s has no Nominated event naming %s (events %d)", p.Name, cl.Name, len(evs.Items))
		}
	}

	// What the lifecycle will do on registration; then the pods run there.
	if _, err := h.kube.RemoveTaints(h.ctx, node.Name, apis.UnregisteredTaintKey, ""); err != nil {
		t.Fatal(err)
	}
	h.eventually("pods running on the new node", 60*time.Second, func() (bool, string) {
		list, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != node.Name || p.Status.Phase != corev1.PodRunning {
				return false, fmt.Sprintf("%s on %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
		}
		return true, ""
	})
}

// NodePool limits count claims in flight: three 1-CPU pods, m5.large only
// (2 vCPU each, one such pod per node) and a 4-CPU limit make two claims.
func TestLimitsRespected(t *testing.T) {
	h := newHarness(t, poolSpec{types: `["m5.large"]`, limits: map[string]string{"cpu": "4"}})
	h.createPods("web", 3, "1")
	res := h.run(h.deps(nil))
	// (Result counts are cluster-wide; other tests' pods may linger while
	// their namespaces terminate, so assertions stay within this test.)
	if len(res.Launched) != 2 {
		t.Fatalf("want 2 launches, got %+v", res)
	}
	// Again: nothing more, the limit is used up by the in-flight claims.
	res = h.run(h.deps(nil))
	if len(res.Created) != 0 || len(h.claims()) != 2 {
		t.Fatalf("limit exceeded on the second run: %+v", res)
	}
	h.checkOneInstancePerClaim()
	evs, err := h.cloud.KubeClient.CoreV1().Events(h.ns).List(h.ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling,source=nodewright"})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		if strings.Contains(e.Message, "limit") {
			found = true
		}
	}
	if !found {
		t.Errorf("no FailedScheduling event from nodewright naming the limit (%d events)", len(evs.Items))
	}
}

// Spot m5.large is out of capacity in every zone: CreateFleet reports
// InsufficientInstanceCapacity, the claim is deleted, and the same run
// re-plans its pods onto on-demand.
func TestInsufficientCapacityReplannedInSameRun(t *testing.T) {
	h := newHarness(t, poolSpec{types: `["m5.large"]`, ct: `["spot", "on-demand"]`})
	h.spotShort()
	h.sim.ResetCalls()
	h.createPods("web", 2, "500m")
	res := h.run(h.deps(nil))
	if len(res.CapacityFailed) != 1 || len(res.Launched) != 1 || res.Rounds != 2 {
		t.Fatalf("want a capacity failure re-planned in round 2, got %+v", res)
	}
	cls := h.claims()
	if len(cls) != 1 || cls[0].Labels[apis.CapacityTypeLabelKey] != "on-demand" {
		t.Fatalf("claims %v", cls)
	}
	failed := 0
	for _, c := range h.fleetCalls(false) {
		if c.Params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "spot" {
			failed++
		}
	}
	if failed == 0 {
		t.Error("no spot CreateFleet in the call log")
	}
	tomb, err := h.store.GetTombstone(h.ctx, res.CapacityFailed[0])
	if err != nil {
		t.Fatalf("tombstone of the spot claim: %v", err)
	}
	if c := tomb.Claim.Condition(apis.ConditionLaunched); c == nil || c.Reason != "InsufficientCapacity" {
		t.Errorf("tombstone condition %+v", c)
	}
	ice, err := h.store.UnavailableOfferings(h.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ice) == 0 {
		t.Error("the ICE set in the store is empty")
	}
	h.checkOneInstancePerClaim()
}
