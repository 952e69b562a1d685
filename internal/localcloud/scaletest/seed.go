package scaletest

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
)

// seedPool is one pool's real node, which every seeded node of the pool
// copies, and the size of the pods that fill its nodes.
type seedPool struct {
	name     string
	claim    *apis.NodeClaim
	node     *corev1.Node
	instance ec2types.Instance
	// cpu and memory of each pod: PodsPerNode of them fill a node so that
	// the CPU left over is less than one pod, so no pod fits beside
	// another node's pods and consolidation finds nothing to do.
	cpu, memory resource.Quantity
	// nodes is how many nodes the pool has, its template included.
	nodes int
	// names are the pool's node names, the template's first.
	names []string
}

// provisionTemplates has the functions provision one real node per pool:
// a small pod per pool, a provisioner pass, lifecycle passes until every
// claim is initialized, then the pods go (seeded pods fill the nodes).
func (c *Cluster) provisionTemplates() {
	t, ns := c.t, c.Env.Namespace
	for _, name := range c.Shape.poolNames() {
		p := cloudtest.PausePod(ns, "template-"+name, "template", map[string]string{PoolLabel: name}, "100m", "128Mi")
		if _, err := c.admin.CoreV1().Pods(ns).Create(c.ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cloudtest.WaitUnschedulable(c.ctx, t, c.admin, ns, "app=template", c.Shape.Pools, 2*time.Minute)
	res, err := c.Invoke(Provisioner)
	if err != nil {
		t.Fatalf("provision the template nodes: %v", err)
	}
	if r, ok := res.(*provisioning.Result); !ok || len(r.Launched) != c.Shape.Pools {
		t.Fatalf("provision the template nodes: want %d launched, got %+v", c.Shape.Pools, res)
	}
	cloudtest.Eventually(t, "template claims initialized", 2*time.Minute, func() (bool, string) {
		if _, err := c.Invoke(Lifecycle); err != nil {
			return false, err.Error()
		}
		claims := cloudtest.Claims(c.ctx, t, c.Env.Store)
		for _, cl := range claims {
			if !cl.IsTrue(apis.ConditionInitialized) {
				return false, cl.Name + " not initialized"
			}
		}
		return len(claims) == c.Shape.Pools, fmt.Sprintf("%d claims", len(claims))
	})
	grace := int64(0)
	if err := c.admin.CoreV1().Pods(ns).DeleteCollection(c.ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace},
		metav1.ListOptions{LabelSelector: "app=template"}); err != nil {
		t.Fatal(err)
	}
	c.loadTemplates()
}

// loadTemplates reads each pool's claim, Node and instance and sizes its
// pods from the Node's allocatable.
func (c *Cluster) loadTemplates() {
	t := c.t
	per := c.Shape.Nodes / c.Shape.Pools
	for i, cl := range cloudtest.Claims(c.ctx, t, c.Env.Store) {
		node, err := c.admin.CoreV1().Nodes().Get(c.ctx, cl.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		inst, _, ok := c.Env.Cloud.AWS.EC2().Instance(cl.Status.InstanceID)
		if !ok {
			t.Fatalf("no instance %s", cl.Status.InstanceID)
		}
		n := int64(c.Shape.PodsPerNode)
		alloc := node.Status.Allocatable
		sp := &seedPool{name: cl.NodePoolName(), claim: cl, node: node, instance: inst, nodes: per, names: []string{node.Name},
			cpu:    *resource.NewMilliQuantity(alloc.Cpu().MilliValue()/n, resource.DecimalSI),
			memory: *resource.NewQuantity(alloc.Memory().Value()/n*9/10/(1<<20)*(1<<20), resource.BinarySI)}
		if i < c.Shape.Nodes%c.Shape.Pools {
			sp.nodes++
		}
		c.pools = append(c.pools, sp)
	}
}

// seed copies each pool's template into its other nodes (instance, claim,
// Node) and fills every node with bound pods, Workers objects at once.
func (c *Cluster) seed() {
	start := time.Now()
	g, _ := errgroup.WithContext(c.ctx)
	g.SetLimit(c.Shape.Workers)
	for _, sp := range c.pools {
		clones, err := c.Env.Cloud.AWS.EC2().CloneRunning(sp.claim.Status.InstanceID, sp.nodes-1)
		if err != nil {
			c.t.Fatal(err)
		}
		for i, inst := range clones {
			sp.names = append(sp.names, aws.ToString(inst.PrivateDnsName))
			g.Go(func() error { return c.seedNode(sp, i, inst) })
		}
	}
	if err := g.Wait(); err != nil {
		c.t.Fatalf("seed nodes: %v", err)
	}
	c.t.Logf("seeded %d nodes in %s", c.Shape.Nodes, time.Since(start).Round(time.Second))
	start = time.Now()
	var made atomic.Int64
	defer c.progress("seeded pods", &made)()
	for _, sp := range c.pools {
		for _, node := range sp.names {
			for j := range c.Shape.PodsPerNode {
				g.Go(func() error {
					made.Add(1)
					return c.createPod(sp, fmt.Sprintf("%s-%d", strings.SplitN(node, ".", 2)[0], j), node)
				})
			}
		}
	}
	if err := g.Wait(); err != nil {
		c.t.Fatalf("seed pods (%d made): %v", made.Load(), err)
	}
	took := time.Since(start)
	c.t.Logf("seeded %d pods in %s (%.0f pods/s)", made.Load(), took.Round(time.Second), float64(made.Load())/took.Seconds())
}

// progress logs what count says every minute until the returned func is
// called: seeding 40,000 pods takes minutes.
func (c *Cluster) progress(what string, count *atomic.Int64) (stop func()) {
	done := make(chan struct{})
	go func() {
		start := time.Now()
		tick := time.NewTicker(time.Minute)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				n := count.Load()
				c.t.Logf("%s: %d after %s (%.0f/s)", what, n, time.Since(start).Round(time.Second), float64(n)/time.Since(start).Seconds())
			}
		}
	}()
	return func() { close(done) }
}

// seedNode creates the Node and the claim of one cloned instance.
func (c *Cluster) seedNode(sp *seedPool, i int, inst ec2types.Instance) error {
	sw := swapper(sp, inst)
	node := sp.node.DeepCopy()
	node.ObjectMeta = metav1.ObjectMeta{Name: sw(node.Name), Labels: swapMap(node.Labels, sw),
		Annotations: swapMap(node.Annotations, sw), Finalizers: node.Finalizers}
	node.Spec.ProviderID = sw(node.Spec.ProviderID)
	for j := range node.Status.Addresses {
		node.Status.Addresses[j].Address = sw(node.Status.Addresses[j].Address)
	}
	node.Status.NodeInfo.MachineID, node.Status.NodeInfo.SystemUUID = sw(node.Status.NodeInfo.MachineID), sw(node.Status.NodeInfo.SystemUUID)
	if _, err := c.admin.CoreV1().Nodes().Create(c.ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create node %s: %w", node.Name, err)
	}
	cl := sp.claim.DeepCopy()
	cl.Name = fmt.Sprintf("%s-s%05d", sp.claim.Name, i)
	cl.ResourceVersion, cl.UID = "", ""
	cl.Labels, cl.Annotations = swapMap(cl.Labels, sw), swapMap(cl.Annotations, sw)
	// The first look at the clone's pods sets its baseline, as for a new node.
	delete(cl.Annotations, podSetAnnotation)
	cl.Status.ProviderID, cl.Status.InstanceID, cl.Status.NodeName = sw(cl.Status.ProviderID), sw(cl.Status.InstanceID), node.Name
	if err := c.Env.Store.CreateNodeClaim(c.ctx, cl); err != nil {
		return fmt.Errorf("create nodeclaim %s: %w", cl.Name, err)
	}
	return nil
}

// podSetAnnotation is lifecycle.AnnotationPodSet (not imported: the
// harness stays outside the controllers).
const podSetAnnotation = "nodewright.io/pod-set"

// statusByAnnotation on a pod keeps KWOK's pod-ready stage off it (the
// local cloud's stages): its creator writes its status.
const statusByAnnotation = "nodewright.io/status-by"

// swapper maps the template's identifiers to inst's: node name and IP
// whole, the instance ID (with or without "i-") wherever it appears.
func swapper(sp *seedPool, inst ec2types.Instance) func(string) string {
	oldName, newName := sp.node.Name, aws.ToString(inst.PrivateDnsName)
	oldIP, newIP := aws.ToString(sp.instance.PrivateIpAddress), aws.ToString(inst.PrivateIpAddress)
	oldID := strings.TrimPrefix(aws.ToString(sp.instance.InstanceId), "i-")
	newID := strings.TrimPrefix(aws.ToString(inst.InstanceId), "i-")
	return func(s string) string {
		switch s {
		case oldName:
			return newName
		case oldIP:
			return newIP
		}
		return strings.ReplaceAll(s, oldID, newID)
	}
}

func swapMap(m map[string]string, sw func(string) string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = sw(v)
	}
	return out
}

// createPod creates one pod of sp's size bound to node (or pending when
// node is empty).
func (c *Cluster) createPod(sp *seedPool, name, node string) error {
	p := cloudtest.PausePod(c.Env.Namespace, name, sp.name, map[string]string{PoolLabel: sp.name}, sp.cpu.String(), sp.memory.String())
	p.Spec.NodeName = node
	if node != "" {
		// Its status is written below: KWOK's pod-ready stage leaves it
		// alone rather than race that write with one of its own.
		p.Annotations = map[string]string{statusByAnnotation: "scaletest"}
	}
	if node == "" {
		// No scheduler takes it: the harness marks it unschedulable itself,
		// so the kube-scheduler's work is not part of what is measured.
		p.Spec.SchedulerName = "scaletest-none"
	}
	if _, err := c.admin.CoreV1().Pods(c.Env.Namespace).Create(c.ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create pod %s: %w", name, err)
	}
	now := metav1.Now()
	var status corev1.PodStatus
	if node == "" {
		status.Phase = corev1.PodPending
		status.Conditions = append(status.Conditions, corev1.PodCondition{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/0 nodes are available (scaletest)", LastTransitionTime: now,
		})
	} else {
		status = runningStatus(p, now)
	}
	// A merge patch, not an update: KWOK may touch the pod in between.
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	if _, err := c.admin.CoreV1().Pods(c.Env.Namespace).Patch(c.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("set the status of pod %s: %w", name, err)
	}
	return nil
}

// runningStatus is p's status as a kubelet reports a started pod: Running,
// Ready, its containers running. One write per pod from the harness, Workers
// at once, instead of KWOK's (which would also race it with a second).
func runningStatus(p *corev1.Pod, now metav1.Time) corev1.PodStatus {
	status := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &now}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		status.Conditions = append(status.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	for _, c := range p.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: new(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return status
}
