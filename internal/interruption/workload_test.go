package interruption_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/store"
)

// deploy creates a Deployment of n pods only this test's pool takes, and a
// PDB with minAvailable, and provisions capacity for them; it returns once
// every pod runs on one node and that node's claim.
func (h *harness) deploy(n int, minAvailable int) (*apis.NodeClaim, *corev1.Node) {
	h.t.Helper()
	cloudtest.Workload{Name: "web", Replicas: int32(n), CPU: "200m", Memory: "256Mi", NodeSelector: map[string]string{"nodewright.io/test": h.pool},
		MinAvailable: new(int32(minAvailable))}.Deploy(h.ctx, h.t, h.cloud.KubeClient, h.ns)
	cloudtest.WaitUnschedulable(h.ctx, h.t, h.cloud.KubeClient, h.ns, "app=web", n, 30*time.Second)
	pd, err := h.app.ProvisionerDeps()
	if err != nil {
		h.t.Fatal(err)
	}
	p, err := provisioning.New(pd)
	if err != nil {
		h.t.Fatal(err)
	}
	res, err := p.Run(h.ctx, provisioning.Trigger{Source: provisioning.TriggerManual})
	if err != nil || len(res.Launched) != 1 {
		h.t.Fatalf("initial provisioning: %+v %v", res, err)
	}
	cl, err := h.store.GetNodeClaim(h.ctx, res.Launched[0])
	if err != nil {
		h.t.Fatal(err)
	}
	node := h.waitRunningOn(n, "")
	if node.Spec.ProviderID != cl.Status.ProviderID {
		h.t.Fatalf("pods run on %s (%s), claim %s has %s", node.Name, node.Spec.ProviderID, cl.Name, cl.Status.ProviderID)
	}
	cl, err = h.store.GetNodeClaim(h.ctx, cl.Name)
	if err != nil {
		h.t.Fatal(err)
	}
	return cl, node
}

// pods lists the deployment's pods that are not terminating.
func (h *harness) pods() []corev1.Pod {
	list, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).List(h.ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return nil
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// waitRunningOn waits for n ready pods, all on one node other than
// notOn, and returns that node.
func (h *harness) waitRunningOn(n int, notOn string) *corev1.Node {
	h.t.Helper()
	var nodeName string
	h.eventually(fmt.Sprintf("%d pods ready on one node", n), 90*time.Second, func() (bool, string) {
		pods := h.pods()
		nodes := map[string]int{}
		readyN := 0
		for i := range pods {
			if kubeplane.PodReady(&pods[i]) {
				readyN++
				nodes[pods[i].Spec.NodeName]++
			}
		}
		if readyN != n || len(nodes) != 1 {
			return false, fmt.Sprintf("%d/%d ready on %v", readyN, n, nodes)
		}
		for name := range nodes {
			nodeName = name
		}
		return nodeName != notOn, "still on " + notOn
	})
	node, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return node
}

// watchPDB samples the deployment's healthy pods (ready, not terminating)
// until stop is called and returns the minimum seen.
func (h *harness) watchPDB() (stop func() int) {
	ctx, cancel := context.WithCancel(h.ctx)
	minSeen := int(^uint(0) >> 1)
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			healthy := 0
			pods := h.pods()
			for i := range pods {
				if kubeplane.PodReady(&pods[i]) {
					healthy++
				}
			}
			if pods != nil {
				mu.Lock()
				minSeen = min(minSeen, healthy)
				mu.Unlock()
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	return func() int {
		cancel()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		return minSeen
	}
}

func (h *harness) fleetCallsSince(since time.Time) []awssim.Call {
	var out []awssim.Call
	for _, c := range h.sim.Calls("ec2", "CreateFleet") {
		if c.ErrorCode == "" && !c.Time.Before(since) && cloudtest.Tags(c, h.pool) {
			out = append(out, c)
		}
	}
	return out
}

func (h *harness) nodeEvents(node, reason string) int {
	list, err := h.cloud.KubeClient.CoreV1().Events("").List(h.ctx, metav1.ListOptions{
		FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		n += int(max(e.Count, 1))
	}
	return n
}

func (h *harness) queueEmpty() (bool, string) {
	v, inflight, delayed := h.sim.SQS().Depth(h.qName)
	return v+inflight+delayed == 0, fmt.Sprintf("queue: %d visible, %d in flight, %d delayed", v, inflight, delayed)
}

func (h *harness) dlqDepth() int {
	v, inflight, delayed := h.sim.SQS().Depth(h.dlqName)
	return v + inflight + delayed
}

// waitGone waits for the claim to be tombstoned and its node deleted.
func (h *harness) waitGone(cl *apis.NodeClaim, node string) {
	h.t.Helper()
	h.eventually("interrupted claim terminated and node deleted", 90*time.Second, func() (bool, string) {
		if _, err := h.store.GetNodeClaim(h.ctx, cl.Name); !errors.Is(err, store.ErrNotFound) {
			return false, fmt.Sprintf("claim %s still there (%v)", cl.Name, err)
		}
		if _, err := h.cloud.KubeClient.CoreV1().Nodes().Get(h.ctx, node, metav1.GetOptions{}); err == nil {
			return false, "node " + node + " still there"
		}
		return true, ""
	})
}

// watchTaint reports when the node first carries the disrupted taint (the
// API server's view, from a watch started now).
func (h *harness) watchTaint(node string) (wait func() time.Time) {
	h.t.Helper()
	return cloudtest.WatchTaint(h.ctx, h.t, h.cloud.KubeClient, node, apis.DisruptedTaintKey, 30*time.Second)
}

// spotWarning is the envelope EC2 sends through EventBridge.
func spotWarning(id, instanceID, region string) string {
	return fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","account":"123456789012","time":%q,"region":%q,"resources":["arn:aws:ec2:%s:123456789012:instance/%s"],"detail":{"instance-id":%q,"instance-action":"terminate"}}`,
		id, time.Now().UTC().Format(time.RFC3339), region, region, instanceID, instanceID)
}

// replacementClaim is the test's only claim once the interrupted one is
// gone; the test fails unless it is the replacement node's.
func (h *harness) replacementClaim(repl *corev1.Node) *apis.NodeClaim {
	h.t.Helper()
	claims, err := h.store.ListNodeClaims(h.ctx)
	if err != nil {
		h.t.Fatal(err)
	}
	if len(claims) != 1 || claims[0].Status.ProviderID != repl.Spec.ProviderID {
		h.t.Fatalf("want exactly the replacement claim, got %d claims", len(claims))
	}
	return claims[0]
}
