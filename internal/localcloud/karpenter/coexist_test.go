package karpenter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localcloud/karpenter"
)

// ownerLabel is the label each NodePool puts on its nodes, which each
// workload selects: karpenter or nodewright.
const ownerLabel = "coexist.nodewright.io/owner"

// Karpenter (its KWOK provider, the real controller) and nodewright (its
// four controller functions) share one cluster, each with its own NodePool
// and workload, and a third fleet neither launched (an instance and
// launch template tagged as Karpenter's AWS provider tags them) runs
// beside them. Through scale-up, a spot interruption of a nodewright
// node, scale-down (consolidation on both sides) and the workloads'
// deletion (emptiness), the API server's audit log and the EC2
// simulator's call log show that neither deletes, drains, taints or counts
// the other's nodes, NodeClaims or instances, and each reaches its own
// node counts.
func TestCoexistsWithKarpenter(t *testing.T) {
	start := time.Now()
	// The first run builds Karpenter (minutes; half an hour on a busy 2-core
	// machine): before the test's own timeout starts.
	buildCtx, cancel := context.WithTimeout(context.Background(), 80*time.Minute)
	defer cancel()
	if _, err := karpenter.EnsureBinary(buildCtx, nil); err != nil {
		t.Fatal(err)
	}
	t.Logf("Karpenter %s built (%s)", karpenter.Version, time.Since(start).Round(time.Second))
	e := cloudtest.NewEnv(t, shared, cloudtest.PoolName("nw"), cloudtest.Timeout(25*time.Minute), cloudtest.WorkQueue(), cloudtest.InterruptionQueue(),
		cloudtest.InstanceTypes("m5.large", "m5.xlarge"), cloudtest.CapacityTypes("spot"),
		cloudtest.PoolSpec(func(p *apistest.Pool) {
			p.Labels = map[string]string{ownerLabel: byNodewright}
			p.ConsolidationPolicy, p.ConsolidateAfter, p.Budgets = "WhenEmptyOrUnderutilized", "2s", []apistest.Budget{{Nodes: "100%"}}
		}))
	otherID, otherLT := karpenterAWSInstance(t, e)
	dyn := startKarpenter(t, e)
	t.Logf("Karpenter running with NodePool %s beside nodewright's NodePool %s (%s)", karpenterPool, e.Pool, time.Since(start).Round(time.Second))
	f := watchFleet(t, e, otherID)
	startNodewright(t, e, 500*time.Millisecond)
	c := &coexist{e: e, dyn: dyn, f: f}

	for _, w := range []string{byKarpenter, byNodewright} {
		cloudtest.Workload{Name: w, Replicas: 6, CPU: "700m", Memory: "512Mi", NodeSelector: map[string]string{ownerLabel: w},
			GraceSeconds: new(int64(0))}.Deploy(e.Ctx, t, e.Cloud.KubeClient, e.Namespace)
	}
	c.phase("scale-up: 6 pods each, all Running (Karpenter on several 2-CPU nodes)", func() (bool, string) {
		return c.running(byKarpenter) == 6 && c.running(byNodewright) == 6 && f.count(byKarpenter) >= 2 && f.count(byNodewright) > 0, c.String()
	})
	c.countsAgree()
	c.reclaimSpot()
	c.phase("spot interruption: nodewright's pods Running again on a replacement", func() (bool, string) {
		return c.running(byNodewright) == 6 && c.running(byKarpenter) == 6 && !c.nodeExists(c.reclaimed), c.String()
	})
	c.scale(1)
	c.phase("scale-down to 1 pod each: both consolidate to one node", func() (bool, string) {
		return c.running(byKarpenter) == 1 && c.running(byNodewright) == 1 && f.count(byKarpenter) == 1 && f.count(byNodewright) == 1, c.String()
	})
	c.countsAgree()
	c.deleteWorkloads()
	c.phase("workloads deleted: both empty their pools", func() (bool, string) {
		return f.count(byKarpenter) == 0 && f.count(byNodewright) == 0 && len(c.karpenterClaims()) == 0, c.String()
	})
	c.checkAudit()
	c.checkEC2(otherID, otherLT)
	if f.count(byOther) != 1 {
		t.Errorf("the Karpenter-tagged instance's node is gone: %s", f)
	}
	t.Logf("done in %s", time.Since(start).Round(time.Second))
}

type coexist struct {
	e         *cloudtest.Env
	dyn       dynamic.Interface
	f         *fleet
	reclaimed string // the nodewright node whose spot instance EC2 reclaimed
}

func (c *coexist) String() string {
	return fmt.Sprintf("pods running karpenter=%d nodewright=%d; nodes %s; Karpenter NodeClaims %v",
		c.running(byKarpenter), c.running(byNodewright), c.f, c.karpenterClaims())
}

func (c *coexist) phase(what string, done func() (bool, string)) {
	c.e.T.Helper()
	t0 := time.Now()
	cloudtest.Eventually(c.e.T, what, 6*time.Minute, done)
	c.e.T.Logf("%s: %s (%s)", what, c.String(), time.Since(t0).Round(100*time.Millisecond))
}

// running counts app=w pods Running.
func (c *coexist) running(w string) int {
	pods, err := c.e.Cloud.KubeClient.CoreV1().Pods(c.e.Namespace).List(c.e.Ctx, metav1.ListOptions{LabelSelector: "app=" + w})
	if err != nil {
		return -1
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			n++
		}
	}
	return n
}

func (c *coexist) nodeExists(name string) bool {
	_, err := c.e.Cloud.KubeClient.CoreV1().Nodes().Get(c.e.Ctx, name, metav1.GetOptions{})
	return err == nil
}

func (c *coexist) karpenterClaims() []string {
	names, err := claimNames(c.e.Ctx, c.dyn)
	if err != nil {
		return []string{err.Error()}
	}
	return names
}

func (c *coexist) scale(n int) {
	for _, w := range []string{byKarpenter, byNodewright} {
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
		if _, err := c.e.Cloud.KubeClient.AppsV1().Deployments(c.e.Namespace).Patch(c.e.Ctx, w, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			c.e.T.Fatal(err)
		}
	}
}

func (c *coexist) deleteWorkloads() {
	for _, w := range []string{byKarpenter, byNodewright} {
		if err := c.e.Cloud.KubeClient.AppsV1().Deployments(c.e.Namespace).Delete(c.e.Ctx, w, metav1.DeleteOptions{}); err != nil {
			c.e.T.Fatal(err)
		}
	}
}

// reclaimSpot has EC2 reclaim one of nodewright's spot instances.
func (c *coexist) reclaimSpot() {
	c.e.T.Helper()
	for _, cl := range cloudtest.Claims(c.e.Ctx, c.e.T, c.e.Store) {
		if cl.Labels[apis.CapacityTypeLabelKey] == apis.CapacityTypeSpot && cl.Status.InstanceID != "" && cl.Status.NodeName != "" {
			if err := c.e.Cloud.AWS.ReclaimSpot(cl.Status.InstanceID); err != nil {
				c.e.T.Fatal(err)
			}
			c.reclaimed = cl.Status.NodeName
			c.e.T.Logf("EC2 reclaims nodewright's spot instance %s (node %s)", cl.Status.InstanceID, cl.Status.NodeName)
			return
		}
	}
	c.e.T.Fatalf("no nodewright spot instance to reclaim: %s", c)
}

// countsAgree checks that each autoscaler counts its own nodes only:
// Karpenter's NodePool status and NodeClaims name only its KWOK nodes,
// nodewright's NodeClaim table only its own.
func (c *coexist) countsAgree() {
	c.e.T.Helper()
	cloudtest.Eventually(c.e.T, "Karpenter's NodePool status to count its own nodes", time.Minute, func() (bool, string) {
		n, err := poolNodes(c.e.Ctx, c.dyn)
		return err == nil && int(n) == c.f.count(byKarpenter), fmt.Sprintf("status.nodes=%d (%v); %s", n, err, c.f)
	})
	for _, name := range c.karpenterClaims() {
		if !strings.HasPrefix(name, karpenterPool+"-") {
			c.e.T.Errorf("Karpenter has NodeClaim %s, not of its NodePool", name)
		}
	}
	cloudtest.Eventually(c.e.T, "nodewright's NodeClaim table to count its own nodes", time.Minute, func() (bool, string) {
		claims := cloudtest.Claims(c.e.Ctx, c.e.T, c.e.Store)
		return len(claims) == c.f.count(byNodewright), fmt.Sprintf("%d claims; %s", len(claims), c.f)
	})
	for _, cl := range cloudtest.Claims(c.e.Ctx, c.e.T, c.e.Store) {
		if by := c.f.ownerOf(cl.Status.NodeName); cl.Status.NodeName != "" && by != byNodewright {
			c.e.T.Errorf("nodewright's claim %s names node %s, launched by %q", cl.Name, cl.Status.NodeName, by)
		}
	}
}
