package demo

import (
	"context"
	"sort"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// observer watches pods, nodes and instances and prints their changes.
type observer struct {
	d  *run
	ns string

	mu        sync.Mutex
	podC      podCounts
	nodes     map[string]bool // name -> Ready
	instances map[string]instanceView
	known     map[string]bool // instances present before the demo
}

type instanceView struct {
	id, typ, zone, capacity, state string
	price                          float64
}

func newObserver(d *run, ns string) *observer {
	o := &observer{d: d, ns: ns, nodes: map[string]bool{}, instances: map[string]instanceView{}, known: map[string]bool{}}
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

func (o *observer) liveInstances() []instanceView {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []instanceView
	for _, in := range o.instances {
		if in.state != string(ec2types.InstanceStateNameTerminated) {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
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
	sim := o.d.cloud.AWS.EC2()
	for _, in := range sim.Instances() {
		id := sdkaws.ToString(in.InstanceId)
		if o.known[id] {
			continue
		}
		_, capacity, _ := sim.Instance(id)
		v := instanceView{id: id, typ: string(in.InstanceType), capacity: capacity}
		if in.Placement != nil {
			v.zone = sdkaws.ToString(in.Placement.AvailabilityZone)
		}
		if in.State != nil {
			v.state = string(in.State.Name)
		}
		if capacity == "spot" {
			v.price, _ = sim.SpotPrice(v.typ, v.zone)
		} else {
			v.price, _ = sim.OnDemandPrice(v.typ)
		}
		o.mu.Lock()
		prev, ok := o.instances[id]
		o.instances[id] = v
		o.mu.Unlock()
		if !ok || prev.state != v.state {
			tl.Printf("%-12s instance %s (%s %s %s $%.4f/h) %s", "ec2", id, v.typ, v.zone, v.capacity, v.price, v.state)
		}
	}
}
