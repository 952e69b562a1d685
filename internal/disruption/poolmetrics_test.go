package disruption

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
)

// Usage sums the pool's claims (deleting and in-flight ones too, as
// Karpenter's nodepool.status.resources), limits are reported per limited
// resource, and nodes by pool and capacity type.
func TestPoolMetrics(t *testing.T) {
	claim := func(pool, capacityType, cpu string) *state.Node {
		cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			apis.NodePoolLabelKey: pool, apis.CapacityTypeLabelKey: capacityType}}}
		cl.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}
		return &state.Node{Claim: cl}
	}
	limited := &apis.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	limited.Spec.Limits = apis.Limits{corev1.ResourceCPU: resource.MustParse("100"), "nvidia.com/gpu": resource.MustParse("4")}
	idle := &apis.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "idle"}}
	var buf bytes.Buffer
	c := &Controller{d: Deps{Config: &apis.Config{NodePools: []*apis.NodePool{limited, idle}}, Metrics: metrics.New(&buf, nil)}}
	c.poolMetrics(&state.Cluster{Nodes: []*state.Node{claim("default", "spot", "2"), claim("default", "on-demand", "4"),
		claim("default", "spot", "500m"), {Name: "unmanaged"}}})
	if err := c.d.Metrics.Flush(); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(l), &doc); err != nil {
			t.Fatal(err)
		}
		key := func(name string) string {
			s, _ := doc["resource_type"].(string)
			if ct, ok := doc["capacity_type"].(string); ok {
				s = ct
			}
			return name + "/" + doc["nodepool"].(string) + "/" + s
		}
		for _, name := range []string{metrics.NodePoolUsage, metrics.NodePoolLimit, metrics.Nodes} {
			if v, ok := doc[name].(float64); ok {
				got[key(name)] = v
			}
		}
	}
	want := map[string]float64{
		"karpenter_nodepools_usage/default/cpu": 6.5, "karpenter_nodepools_usage/default/memory": 3 << 30,
		"karpenter_nodepools_usage/default/nodes": 3, "karpenter_nodepools_usage/default/nvidia.com/gpu": 0,
		"karpenter_nodepools_limit/default/cpu": 100, "karpenter_nodepools_limit/default/nvidia.com/gpu": 4,
		"karpenter_nodepools_usage/idle/cpu": 0, "karpenter_nodepools_usage/idle/memory": 0, "karpenter_nodepools_usage/idle/nodes": 0,
		"nodewright_nodes/default/spot": 2, "nodewright_nodes/default/on-demand": 1,
	}
	if len(got) != len(want) {
		t.Errorf("got %d series, want %d: %v", len(got), len(want), got)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}
