package shadow_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
)

// TestMigrationOneNodePoolAtATime walks MIGRATING.md on the local cloud,
// with its YAML: a cluster whose capacity is Karpenter's (two nodes
// labelled as Karpenter labels them for NodePool P, full with fleet-app),
// a Deployment web and pending batch pods (PDB minAvailable 2) nobody
// serves yet.
//
//   - Shadow (P imported): nothing is written to EC2 or the cluster.
//   - One NodePool (general-nw, tainted and labelled): web opts in and
//     moves to nodewright's nodes; nodewright launches nothing for batch.
//   - All (general-nw and P): nodewright launches for batch.
//   - Back to one (P removed): nodewright drains its two P nodes one at a
//     time, the PDB holding the first until it is deleted, and launches
//     nothing more; Karpenter's P nodes are left alone.
//   - Back to shadow (general-nw replaced by the parked NodePool): web's node
//     drains, then the shadow stack writes nothing.
//
// Throughout, the controllers never write Karpenter's Nodes or evict their
// pods (the API server's audit log).
func TestMigrationOneNodePoolAtATime(t *testing.T) {
	start := time.Now()
	e := cloudtest.NewEnv(t, shared, cloudtest.Timeout(6*time.Minute), cloudtest.PoolLabel("shadow-pool"),
		cloudtest.InstanceTypes("m5.xlarge"), cloudtest.CapacityTypes("on-demand"),
		cloudtest.Resources(func(*cloudtest.Env) localcloud.StackResources { return localcloud.StackResources{Shadow: true} }))
	m := &migration{e: e, t: t, audited: auditMark(t, e.Cloud), karpenter: []string{"karp-mig-a", "karp-mig-b"}}
	m.cluster()

	m.step("shadow", m.shadowPasses)

	nodeClass := cloudtest.NodeClassYAML("default", e.Cloud.ClusterName)
	one := cloudtest.LoadConfig(t, guideYAML(t, "nodewright/general-nw.yaml")+nodeClass)
	live := cloudtest.Deploy(t, e.Cloud, localcloud.StackResources{Table: e.Table})
	d := startDriver(t, e, live.Controller, one)
	m.step("one NodePool", func() {
		m.optIn("web")
		m.waitRollout("web", nwPool)
		m.wantPending("batch", 2)
		m.wantClaims(map[string]int{nwPool: -1})
	})

	all := &apis.Config{NodePools: append(slices.Clone(one.NodePools), e.Config.NodePools...),
		NodeClasses: append(slices.Clone(one.NodeClasses), e.Config.NodeClasses...)}
	m.step("all NodePools", func() {
		d.deploy(all)
		m.waitRunning("batch", e.Pool, 2)
		m.wantClaims(map[string]int{nwPool: -1, e.Pool: 2})
	})

	m.step("back to one NodePool", func() {
		launches := len(e.Cloud.AWS.Calls("ec2", "CreateFleet"))
		d.deploy(one)
		m.drainOneAtATime(e.Pool)
		m.wantPending("batch", 2)
		m.wantClaims(map[string]int{nwPool: -1})
		if n := len(e.Cloud.AWS.Calls("ec2", "CreateFleet")) - launches; n != 0 {
			t.Errorf("%d launches after NodePool %s left the configuration", n, e.Pool)
		}
	})

	m.step("back to shadow", func() {
		launches := len(e.Cloud.AWS.Calls("ec2", "CreateFleet"))
		d.deploy(cloudtest.LoadConfig(t, guideYAML(t, "nodewright/parked.yaml")+nodeClass))
		m.waitGone(nwPool)
		m.wantPending("web", 2)
		if n := len(e.Cloud.AWS.Calls("ec2", "CreateFleet")) - launches; n != 0 {
			t.Errorf("the parked NodePool launched %d times", n)
		}
		d.stop()
		m.shadowPasses()
	})
	m.karpenterUntouched()
	t.Logf("migration walked in %s", time.Since(start).Round(time.Second))
}

// nwPool is the name of the guide's NodePool of nodewright's.
const nwPool = "general-nw"

// migration is the test's cluster and its checks.
type migration struct {
	e         *cloudtest.Env
	t         *testing.T
	audited   int
	karpenter []string
}

func (m *migration) step(name string, f func()) {
	m.t.Helper()
	start := time.Now()
	f()
	if m.t.Failed() {
		m.t.FailNow()
	}
	m.t.Logf("step %q done in %s", name, time.Since(start).Round(100*time.Millisecond))
}

// shadowPasses runs a pass of each function of the shadow stack: it
// writes nothing to EC2 or the cluster.
func (m *migration) shadowPasses() {
	m.t.Helper()
	ec2, audited := ec2WriteCount(m.e), auditMark(m.t, m.e.Cloud)
	for _, fn := range []string{"provisioner", "disruption", "lifecycle"} {
		invoke(m.e, m.t, fn)
	}
	if n := ec2WriteCount(m.e) - ec2; n != 0 {
		m.t.Errorf("%d EC2 writes in shadow mode", n)
	}
	assertNoKubeWrites(m.t, m.e.Cloud, audited)
}

// cluster starts Karpenter's two nodes, full with fleet-app (7 of 8 CPUs),
// web on their spare room and batch pending (3 CPUs, too big for it).
func (m *migration) cluster() {
	e, t := m.e, m.t
	cs := e.Cloud.Plane.Client()
	for _, name := range m.karpenter {
		karpenterNode(e.Ctx, t, cs, e.Pool, name, e.Cloud.Region+"a")
	}
	sel := map[string]string{"shadow-pool": e.Pool}
	cloudtest.Workload{Name: "fleet-app", Replicas: 2, CPU: "7", Memory: "1Gi", NodeSelector: sel}.Deploy(e.Ctx, t, cs, e.Namespace)
	m.waitRunning("fleet-app", e.Pool, 2)
	cloudtest.Workload{Name: "web", Replicas: 2, CPU: "400m", Memory: "256Mi"}.Deploy(e.Ctx, t, cs, e.Namespace)
	m.waitRunning("web", e.Pool, 2)
	two := int32(2)
	cloudtest.Workload{Name: "batch", Replicas: 2, CPU: "3", Memory: "1Gi", NodeSelector: sel, MinAvailable: &two}.Deploy(e.Ctx, t, cs, e.Namespace)
	cloudtest.WaitUnschedulable(e.Ctx, t, cs, e.Namespace, "app=batch", 2, 2*time.Minute)
}

// guideYAML is the YAML block of MIGRATING.md whose first line is
// "# name".
func guideYAML(t *testing.T, name string) string {
	t.Helper()
	guide, err := os.ReadFile(filepath.Join("..", "..", "MIGRATING.md"))
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)```yaml\n# " + regexp.QuoteMeta(name) + "\n(.*?)```").FindSubmatch(guide)
	if block == nil {
		t.Fatalf("MIGRATING.md has no YAML block %q", name)
	}
	return string(block[1])
}

// optIn applies the guide's opt-in patch to Deployment name.
func (m *migration) optIn(name string) {
	m.t.Helper()
	patch, err := yaml.YAMLToJSON([]byte(guideYAML(m.t, "opt-in.yaml")))
	if err != nil {
		m.t.Fatal(err)
	}
	if _, err := m.e.Cloud.Plane.Client().AppsV1().Deployments(m.e.Namespace).Patch(m.e.Ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		m.t.Fatal(err)
	}
}

// pods are the live pods of app, with the NodePool label of their node
// ("" while pending).
func (m *migration) pods(app string) (map[string]string, string) {
	cs := m.e.Cloud.Plane.Client()
	list, err := cs.CoreV1().Pods(m.e.Namespace).List(m.e.Ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return nil, err.Error()
	}
	out := map[string]string{}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		out[p.Name] = ""
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		n, err := cs.CoreV1().Nodes().Get(m.e.Ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return nil, err.Error()
		}
		out[p.Name] = n.Labels[apis.NodePoolLabelKey]
	}
	return out, fmt.Sprint(out)
}

// waitRunning waits for n pods of app running, all on nodes of pool.
func (m *migration) waitRunning(app, pool string, n int) {
	m.t.Helper()
	cloudtest.Eventually(m.t, app+" running on "+pool, 2*time.Minute, func() (bool, string) {
		pods, msg := m.pods(app)
		ok := len(pods) == n
		for _, p := range pods {
			ok = ok && p == pool
		}
		return ok, msg
	})
}

// waitRollout waits for Deployment name's rollout, its pods on pool.
func (m *migration) waitRollout(name, pool string) {
	m.t.Helper()
	cloudtest.Eventually(m.t, name+" rolled out", 2*time.Minute, func() (bool, string) {
		d, err := m.e.Cloud.Plane.Client().AppsV1().Deployments(m.e.Namespace).Get(m.e.Ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		st := d.Status
		return st.UpdatedReplicas == 2 && st.AvailableReplicas == 2 && st.Replicas == 2, fmt.Sprintf("%+v", st)
	})
	m.waitRunning(name, pool, 2)
}

// wantPending checks that app's n pods wait for a node.
func (m *migration) wantPending(app string, n int) {
	m.t.Helper()
	cloudtest.WaitUnschedulable(m.e.Ctx, m.t, m.e.Cloud.Plane.Client(), m.e.Namespace, "app="+app, n, time.Minute)
}

// wantClaims checks nodewright's live claims by NodePool: exactly the
// pools of want, with the count given (-1: any).
func (m *migration) wantClaims(want map[string]int) {
	m.t.Helper()
	got := map[string]int{}
	for _, cl := range cloudtest.Claims(m.e.Ctx, m.t, m.e.Store) {
		got[cl.NodePoolName()]++
	}
	ok := len(got) == len(want)
	for pool, n := range want {
		ok = ok && got[pool] > 0 && (n < 0 || got[pool] == n)
	}
	if !ok {
		m.t.Errorf("claims by NodePool %v, want %v (-1: any)", got, want)
	}
}

// drainOneAtATime follows pool's claims as they leave: the first is held
// by batch's PDB (its pod stays, the other claim is not marked: a tenth of
// two nodes is one), then the PDB goes and both drain, never two at once.
func (m *migration) drainOneAtATime(pool string) {
	m.t.Helper()
	e, t := m.e, m.t
	leaving := func() (int, int) {
		n, of := 0, 0
		for _, cl := range cloudtest.Claims(e.Ctx, t, e.Store) {
			if cl.NodePoolName() != pool {
				continue
			}
			of++
			if cl.Deleting() {
				if r := cl.DeletionReason(); r != lifecycle.ReasonNodePoolRemoved {
					t.Errorf("claim %s deleted for %q", cl.Name, r)
				}
				n++
			}
		}
		return n, of
	}
	cloudtest.Eventually(t, "a node of the removed NodePool draining", time.Minute, func() (bool, string) {
		n, of := leaving()
		return n == 1, fmt.Sprintf("%d of %d claims leaving", n, of)
	})
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if n, _ := leaving(); n != 1 {
			t.Fatalf("%d claims of the removed NodePool leaving at once, want 1 (the PDB holds it)", n)
		}
		if pods, msg := m.pods("batch"); len(pods) != 2 || slices.Contains(slices.Collect(maps.Values(pods)), "") {
			t.Fatalf("the PDB did not hold batch's pods: %s", msg)
		}
	}
	if err := e.Cloud.Plane.Client().PolicyV1().PodDisruptionBudgets(e.Namespace).Delete(e.Ctx, "batch", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cloudtest.Eventually(t, "the removed NodePool's nodes gone", 2*time.Minute, func() (bool, string) {
		n, of := leaving()
		if n > 1 {
			t.Fatalf("%d claims of the removed NodePool leaving at once", n)
		}
		return of == 0, fmt.Sprintf("%d of %d claims leaving", n, of)
	})
}

// waitGone waits until nodewright has no claim of pool left.
func (m *migration) waitGone(pool string) {
	m.t.Helper()
	cloudtest.Eventually(m.t, "NodePool "+pool+" drained", 2*time.Minute, func() (bool, string) {
		left := 0
		for _, cl := range cloudtest.Claims(m.e.Ctx, m.t, m.e.Store) {
			if cl.NodePoolName() == pool {
				left++
			}
		}
		return left == 0, fmt.Sprintf("%d claims left", left)
	})
}

// karpenterUntouched checks the audit log since the test began: the
// controllers never wrote Karpenter's Nodes nor evicted or deleted their
// pods; and the Nodes are there, without the disrupted taint.
func (m *migration) karpenterUntouched() {
	m.t.Helper()
	events, err := m.e.Cloud.Plane.Audit()
	if err != nil {
		m.t.Fatal(err)
	}
	for _, ev := range events[m.audited:] {
		write := slices.Contains(mutatingVerbs, ev.Verb)
		if write && ev.Resource == "nodes" && slices.Contains(m.karpenter, ev.Name) ||
			write && ev.Resource == "pods" && strings.HasPrefix(ev.Name, "fleet-app-") {
			m.t.Errorf("the controllers touched Karpenter's side: %s", ev)
		}
	}
	for _, name := range m.karpenter {
		n, err := m.e.Cloud.Plane.Client().CoreV1().Nodes().Get(m.e.Ctx, name, metav1.GetOptions{})
		if err != nil || n.DeletionTimestamp != nil || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == apis.DisruptedTaintKey }) {
			m.t.Errorf("Karpenter's node %s: %v", name, err)
		}
	}
	m.waitRunning("fleet-app", m.e.Pool, 2)
}

// driver runs nodewright's provisioner and lifecycle as their one-minute
// schedules would, only faster (every 300 ms), as the stack deployed with
// the current configuration; deploy swaps the configuration, as a
// `cdk deploy` with a changed configDir does.
type driver struct {
	e     *cloudtest.Env
	t     *testing.T
	creds aws.CredentialsProvider
	mu    sync.Mutex
	fns   map[string]app.Handler
	stop  func()
}

func startDriver(t *testing.T, e *cloudtest.Env, creds aws.CredentialsProvider, cfg *apis.Config) *driver {
	t.Helper()
	d := &driver{e: e, t: t, creds: creds}
	d.deploy(cfg)
	ctx, cancel := context.WithCancel(e.Ctx)
	var wg sync.WaitGroup
	wg.Go(func() { d.loop(ctx) })
	var once sync.Once
	d.stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(d.stop)
	return d
}

func (d *driver) deploy(cfg *apis.Config) {
	d.t.Helper()
	fns := map[string]app.Handler{}
	for _, fn := range []string{"provisioner", "lifecycle"} {
		fns[fn] = function(d.e, d.t, settings.ModeNormal, cfg, d.creds, fn)
	}
	d.mu.Lock()
	d.fns = fns
	d.mu.Unlock()
}

func (d *driver) loop(ctx context.Context) {
	for ctx.Err() == nil {
		for _, fn := range []string{"provisioner", "lifecycle"} {
			d.mu.Lock()
			h := d.fns[fn]
			d.mu.Unlock()
			if _, err := h(ctx, scheduled(d.e, fn)); err != nil && ctx.Err() == nil {
				d.t.Errorf("%s pass: %v", fn, err)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(300 * time.Millisecond):
		}
	}
}
