package disruption

import (
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
)

// resourceNodes is the "nodes" resource of NodePool limits and usage.
const resourceNodes corev1.ResourceName = "nodes"

// poolMetrics reports each NodePool's usage (its claims' capacity, as
// Karpenter's nodepool.status.resources) against its limits, and its nodes
// by capacity type. The disruption pass runs on a schedule and already
// holds the view, so these cost no extra reads.
func (c *Controller) poolMetrics(cl *state.Cluster) {
	usage := map[string]corev1.ResourceList{}
	nodes := map[[2]string]int{}
	for _, n := range cl.Nodes {
		if n.Claim == nil {
			continue
		}
		pool := n.Claim.NodePoolName()
		if usage[pool] == nil {
			usage[pool] = corev1.ResourceList{}
		}
		for k, q := range n.Claim.Status.Capacity {
			sum := usage[pool][k]
			sum.Add(q)
			usage[pool][k] = sum
		}
		nodes[[2]string{pool, n.Claim.Labels[apis.CapacityTypeLabelKey]}]++
	}
	limits := map[string]apis.Limits{}
	for _, np := range c.d.Config.NodePools {
		limits[np.Name] = np.Spec.Limits
		if usage[np.Name] == nil {
			usage[np.Name] = corev1.ResourceList{}
		}
	}
	m := c.d.Metrics
	for pool, used := range usage {
		for _, k := range reportedResources(limits[pool]) {
			dims := metrics.Dimensions{"nodepool": pool, "resource_type": string(k)}
			q := used[k]
			if k == resourceNodes {
				q = *resource.NewQuantity(int64(countPool(nodes, pool)), resource.DecimalSI)
			}
			m.Gauge(metrics.NodePoolUsage, q.AsApproximateFloat64(), dims)
			if l, ok := limits[pool][k]; ok {
				m.Gauge(metrics.NodePoolLimit, l.AsApproximateFloat64(), dims)
			}
		}
	}
	for key, n := range nodes {
		m.Gauge(metrics.Nodes, float64(n), metrics.Dimensions{"nodepool": key[0], "capacity_type": key[1]})
	}
}

// reportedResources are the resources whose usage a pool reports: cpu,
// memory and nodes, limited or not, and whatever else its limits name (each
// is a paid series), sorted.
func reportedResources(limits apis.Limits) []corev1.ResourceName {
	set := map[corev1.ResourceName]bool{corev1.ResourceCPU: true, corev1.ResourceMemory: true, resourceNodes: true}
	for k := range limits {
		set[k] = true
	}
	out := make([]corev1.ResourceName, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func countPool(nodes map[[2]string]int, pool string) int {
	n := 0
	for key, c := range nodes {
		if key[0] == pool {
			n += c
		}
	}
	return n
}
