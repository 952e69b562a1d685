package provisioning_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/store"
)

// errCrashed is what every call returns once the simulated process died.
var errCrashed = errors.New("process crashed")

// crasher counts the run's external calls and kills the "process" right
// after the k-th one returns: that call's effect happened, its answer is
// lost, and nothing else the process attempts reaches any server.
type crasher struct {
	mu      sync.Mutex
	at      int // 0: never
	n       int
	crashed bool
	cancel  context.CancelFunc
	calls   []string
}

func (c *crasher) do(name string, f func() error) error {
	c.mu.Lock()
	if c.crashed {
		c.mu.Unlock()
		return errCrashed
	}
	c.n++
	k := c.n
	c.calls = append(c.calls, name)
	c.mu.Unlock()
	err := f()
	c.mu.Lock()
	defer c.mu.Unlock()
	if k == c.at && !c.crashed {
		c.crashed = true
		c.cancel()
	}
	if c.crashed {
		return errCrashed
	}
	return err
}

type crashStore struct {
	s *store.Store
	c *crasher
}

func (w crashStore) AcquireLease(ctx context.Context, name, holder string, d time.Duration) (l *store.Lease, err error) {
	err = w.c.do("store.AcquireLease", func() error { l, err = w.s.AcquireLease(ctx, name, holder, d); return err })
	return l, err
}
func (w crashStore) RenewLease(ctx context.Context, l *store.Lease, d time.Duration) error {
	// Renewals run on a timer; counting them would make step numbers racy.
	if w.c.isCrashed() {
		return errCrashed
	}
	return w.s.RenewLease(ctx, l, d)
}
func (w crashStore) ReleaseLease(ctx context.Context, l *store.Lease) error {
	return w.c.do("store.ReleaseLease", func() error { return w.s.ReleaseLease(ctx, l) })
}
func (w crashStore) GetKV(ctx context.Context, k string) (kv *store.KV, err error) {
	err = w.c.do("store.GetKV", func() error { kv, err = w.s.GetKV(ctx, k); return err })
	return kv, err
}
func (w crashStore) PutKV(ctx context.Context, k string, v []byte, ev int64, ttl time.Duration) (n int64, err error) {
	err = w.c.do("store.PutKV", func() error { n, err = w.s.PutKV(ctx, k, v, ev, ttl); return err })
	return n, err
}
func (w crashStore) ListNodeClaims(ctx context.Context) (out []*apis.NodeClaim, err error) {
	err = w.c.do("store.ListNodeClaims", func() error { out, err = w.s.ListNodeClaims(ctx); return err })
	return out, err
}
func (w crashStore) CreateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	return w.c.do("store.CreateNodeClaim", func() error { return w.s.CreateNodeClaim(ctx, nc) })
}
func (w crashStore) GetNodeClaim(ctx context.Context, name string) (nc *apis.NodeClaim, err error) {
	err = w.c.do("store.GetNodeClaim", func() error { nc, err = w.s.GetNodeClaim(ctx, name); return err })
	return nc, err
}
func (w crashStore) UpdateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	return w.c.do("store.UpdateNodeClaim", func() error { return w.s.UpdateNodeClaim(ctx, nc) })
}
func (w crashStore) MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (nc *apis.NodeClaim, err error) {
	err = w.c.do("store.MutateNodeClaim", func() error { nc, err = w.s.MutateNodeClaim(ctx, name, fn); return err })
	return nc, err
}
func (w crashStore) DeleteNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	return w.c.do("store.DeleteNodeClaim", func() error { return w.s.DeleteNodeClaim(ctx, nc) })
}

func (c *crasher) isCrashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

type crashCluster struct {
	k *kube.Client
	c *crasher
}

func (w crashCluster) Snapshot(ctx context.Context, o kube.SnapshotOptions) (s *kube.Snapshot, err error) {
	err = w.c.do("kube.Snapshot", func() error { s, err = w.k.Snapshot(ctx, o); return err })
	return s, err
}

// PodEvent is advisory and asynchronous: not a step, but nothing after the crash.
func (w crashCluster) PodEvent(ctx context.Context, p *corev1.Pod, typ, reason, format string, args ...any) error {
	if w.c.isCrashed() {
		return errCrashed
	}
	return w.k.PodEvent(ctx, p, typ, reason, format, args...)
}

// crashEC2 makes every EC2 API call of the launch path a step.
type crashEC2 struct {
	nwaws.EC2API
	c *crasher
}

func ec2Step[I, O any](w crashEC2, name string, ctx context.Context, in I, f func(context.Context, I, ...func(*ec2.Options)) (O, error), opts []func(*ec2.Options)) (out O, err error) {
	err = w.c.do("ec2."+name, func() error { out, err = f(ctx, in, opts...); return err })
	return out, err
}

func (w crashEC2) DescribeSubnets(ctx context.Context, in *ec2.DescribeSubnetsInput, o ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	return ec2Step(w, "DescribeSubnets", ctx, in, w.EC2API.DescribeSubnets, o)
}
func (w crashEC2) DescribeSecurityGroups(ctx context.Context, in *ec2.DescribeSecurityGroupsInput, o ...func(*ec2.Options)) (*ec2.DescribeSecurityGroupsOutput, error) {
	return ec2Step(w, "DescribeSecurityGroups", ctx, in, w.EC2API.DescribeSecurityGroups, o)
}
func (w crashEC2) DescribeImages(ctx context.Context, in *ec2.DescribeImagesInput, o ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	return ec2Step(w, "DescribeImages", ctx, in, w.EC2API.DescribeImages, o)
}
func (w crashEC2) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, o ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	return ec2Step(w, "DescribeLaunchTemplates", ctx, in, w.EC2API.DescribeLaunchTemplates, o)
}
func (w crashEC2) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, o ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	return ec2Step(w, "CreateLaunchTemplate", ctx, in, w.EC2API.CreateLaunchTemplate, o)
}
func (w crashEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, o ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	return ec2Step(w, "CreateFleet", ctx, in, w.EC2API.CreateFleet, o)
}
func (w crashEC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, o ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	return ec2Step(w, "DescribeInstances", ctx, in, w.EC2API.DescribeInstances, o)
}

// crashDeps is deps with every external call going through the crasher.
func (h *harness) crashDeps(c *crasher) provisioning.Deps {
	d := h.deps(func(api nwaws.EC2API) nwaws.EC2API { return crashEC2{EC2API: api, c: c} })
	d.Store = crashStore{s: h.store, c: c}
	d.Cluster = crashCluster{k: h.kube, c: c}
	return d
}

// Kill the provisioner after every external call of a run in turn (store,
// API server, each EC2 call of the launch path), then run it again as a
// fresh process: however the first run died, the second completes the
// work, no claim ever gets two instances and no instance is left without
// its claim.
func TestCrashBetweenEveryExternalCall(t *testing.T) {
	crashSweep(t, poolSpec{types: `["m5.large"]`})
}

// The same with spot short everywhere: every run goes through a capacity
// error, the claim's deletion and a re-plan onto on-demand, and is killed
// at each of those steps too.
func TestCrashBetweenEveryExternalCallWithCapacityErrors(t *testing.T) {
	newHarness(t, poolSpec{}).spotShort()
	crashSweep(t, poolSpec{types: `["m5.large"]`, ct: `["spot", "on-demand"]`})
}

func crashSweep(t *testing.T, ps poolSpec) {
	h := newHarness(t, ps)
	base := h.pool
	// Count a clean run's steps.
	clean := &crasher{cancel: func() {}}
	h.createPods("clean", 2, "1")
	res := h.run(h.crashDeps(clean))
	if len(res.Launched) != 2 {
		t.Fatalf("clean run: %+v", res)
	}
	for _, cl := range h.claims() {
		if cl.Labels[apis.CapacityTypeLabelKey] != "on-demand" {
			t.Fatalf("clean run launched %s", cl.Labels[apis.CapacityTypeLabelKey])
		}
	}
	steps := clean.n
	t.Logf("a clean run makes %d external calls: %s", steps, strings.Join(clean.calls, " "))
	if steps < 10 {
		t.Fatalf("implausibly few steps: %v", clean.calls)
	}
	h.terminateAll()

	for k := 1; k <= steps+1; k++ {
		t.Run(fmt.Sprintf("crash-after-%d", k), func(t *testing.T) {
			// A fresh table, NodePool and pods per crash point, so nothing
			// of earlier points (claims, instances, nodes) is in the way.
			h.t = t
			ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
			defer cancelAll()
			h.ctx = ctx
			phase := time.Now()
			timing := func(what string) {
				t.Logf("%s took %s", what, time.Since(phase).Round(time.Millisecond))
				phase = time.Now()
			}
			h.freshPool(fmt.Sprintf("%s-k%d", base, k), ps)
			h.createPods(h.pool, 2, "1")
			defer func() {
				h.terminateAll()
				h.deletePods(h.pool)
			}()
			timing("setup")

			ctx, cancel := context.WithCancel(h.ctx)
			cr := &crasher{at: k, cancel: cancel}
			p, err := provisioning.New(h.crashDeps(cr))
			if err != nil {
				t.Fatal(err)
			}
			_, _ = p.Run(ctx, provisioning.Trigger{Source: provisioning.TriggerManual})
			cancel()
			crashedAt := "(run finished first)"
			if cr.crashed {
				crashedAt = cr.calls[k-1]
			}
			timing("crashed run")

			// The re-run: a new process, once the dead one's lease expires.
			var res *provisioning.Result
			deadline := time.Now().Add(15 * time.Second)
			for {
				res = h.run(h.deps(nil))
				if res.Skipped != "lease held" || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			if res.Skipped != "" {
				t.Fatalf("crash after %s: re-run skipped: %s", crashedAt, res.Skipped)
			}
			timing("re-run")
			h.checkOneInstancePerClaim()
			if n := len(h.claims()); n != 2 {
				t.Errorf("crash after %s: want 2 claims for 2 one-per-node pods, got %d", crashedAt, n)
			}
			// The call log: exactly one on-demand CreateFleet token (on-demand
			// never runs short here) per claim; a token retried after a lost
			// answer returns the same instance. Spot calls answer with
			// capacity errors inside a successful response.
			tokens := map[string]bool{}
			for _, c := range h.fleetCalls(true) {
				if c.Params["TargetCapacitySpecification.DefaultTargetCapacityType"] == "on-demand" {
					tokens[c.Params["ClientToken"]] = true
				}
			}
			if len(tokens) != 2 {
				t.Errorf("crash after %s: %d distinct on-demand CreateFleet tokens, want 2", crashedAt, len(tokens))
			}
			// And a third run has nothing left to do.
			if res := h.run(h.deps(nil)); len(res.Created) != 0 || len(res.Resumed) != 0 {
				t.Errorf("crash after %s: third run still working: %+v", crashedAt, res)
			}
			t.Logf("crash after %s: recovered (re-run created %d, resumed %d)", crashedAt, len(res.Created), len(res.Resumed))
		})
		if t.Failed() {
			break
		}
	}
}
