package demo

import (
	"context"
	"sort"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localrun"
)

// observer watches pods, nodes and instances and prints their changes.
type observer struct {
	d  *run
	ns string

	mu        sync.Mutex
	podC      podCounts
	nodes     map[string]bool // name -> Ready
	instances map[string]localrun.Instance
	known     map[string]bool // instances present before the demo
}

func newObserver(d *run, ns string) *observer {
	o := &observer{d: d, ns: ns, nodes: map[string]bool{}, instances: map[string]localrun.Instance{}, known: map[string]bool{}}
	for _, in := range d.cloud.AWS.EC2().Instances() {
		o.known[sdkaws.ToString(in.InstanceId)] = true
	}
	return o
}

func (o *observer) pods() podCounts {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.podC
}

func (o *observer) nodeCount() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.nodes)
}

func (o *observer) liveInstances() []localrun.Instance {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []localrun.Instance
	for _, in := range o.instances {
		if in.Live() {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

func (o *observer) loop(ctx context.Context) {
	first := true
	for {
		o.poll(ctx, first)
		first = false
		select {
		case <-ctx.Done():
			return
		case <-time.After(150 * time.Millisecond):
		}
	}
}

func (o *observer) poll(ctx context.Context, first bool) {
	tl := o.d.tl
	if pods, err := o.d.kc.CoreV1().Pods(o.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=inflate"}); err == nil {
		c := countPods(pods.Items)
		o.mu.Lock()
		changed := c != o.podC
		o.podC = c
		o.mu.Unlock()
		if changed && !first {
			tl.Printf("%-12s %s", "cluster", c)
		}
	}
	if nodes, err := o.d.kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: apis.NodePoolLabelKey}); err == nil {
		seen := map[string]bool{}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			seen[n.Name] = true
			ready := nodeReady(n)
			o.mu.Lock()
			was, ok := o.nodes[n.Name]
			o.nodes[n.Name] = ready
			o.mu.Unlock()
			switch {
			case !ok:
				tl.Printf("%-12s node %s joined (%s, %s, %s), Ready=%v", "cluster", n.Name, n.Labels[corev1.LabelInstanceTypeStable],
					n.Labels[corev1.LabelTopologyZone], n.Labels[apis.CapacityTypeLabelKey], ready)
			case was != ready:
				tl.Printf("%-12s node %s Ready=%v", "cluster", n.Name, ready)
			}
		}
		o.mu.Lock()
		for name := range o.nodes {
			if !seen[name] {
				delete(o.nodes, name)
				o.mu.Unlock()
				tl.Printf("%-12s node %s gone", "cluster", name)
				o.mu.Lock()
			}
		}
		o.mu.Unlock()
	}
	for _, v := range localrun.Instances(o.d.cloud.AWS.EC2()) {
		if o.known[v.ID] {
			continue
		}
		o.mu.Lock()
		prev, ok := o.instances[v.ID]
		o.instances[v.ID] = v
		o.mu.Unlock()
		if !ok || prev.State != v.State {
			tl.Printf("%-12s instance %s (%s %s %s $%.4f/h) %s", "ec2", v.ID, v.Type, v.Zone, v.CapacityType, v.Price, v.State)
		}
	}
}
