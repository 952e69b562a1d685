package scaletest

import (
	"os"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/provisioning"
)

// One local cloud for the package: the functions' tests' short simulated
// delays.
var shared = NewShared()

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

// TestClusterScale runs the small shape end to end and checks behaviour,
// not timings: on 200 nodes / 4,000 bound pods the lifecycle and the
// disruption function remove and launch nothing, and the provisioner places
// every pod of a 500-pod burst, launching no more nodes than the burst
// needs.
func TestClusterScale(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	c := New(t, shared, Small())
	claims, instances := len(c.Claims()), c.Instances()
	if claims != c.Shape.Nodes || instances != c.Shape.Nodes {
		t.Fatalf("seeded %d claims and %d instances, want %d each", claims, instances, c.Shape.Nodes)
	}
	for _, fn := range []string{Lifecycle, Disruption, Lifecycle} {
		cost, _, err := c.Pass(fn)
		if err != nil {
			t.Fatalf("%s pass: %v", fn, err)
		}
		t.Logf("%s pass: %s", fn, cost)
		c.checkNothingRemoved(t, fn)
	}
	c.Burst(c.Shape.Pending)
	cost, res, err := c.Pass(Provisioner)
	if err != nil {
		t.Fatalf("provisioner pass: %v", err)
	}
	t.Logf("provisioner pass: %s", cost)
	r := provisioned(t, res)
	if r.Pending != c.Shape.Pending || r.Unschedulable != 0 {
		t.Fatalf("provisioner saw %d pending pods and left %d unplaced, want %d and 0", r.Pending, r.Unschedulable, c.Shape.Pending)
	}
	if want := c.Shape.NodesFor(c.Shape.Pending); len(r.Launched) != want {
		t.Fatalf("provisioner launched %d nodes for the burst, want %d: %+v", len(r.Launched), want, r)
	}
	// The launched nodes register after the pass, as on AWS, not during
	// it on the pass's CPU.
	if n := cost.API.RequestsByResource["POST nodes"]; n > 0 && cost.Wall < RunningAfter+RegisteredAfter {
		t.Errorf("%v nodes registered during a %s pass", n, cost.Wall)
	}
}

// checkNothingRemoved fails t if fn's pass removed or launched anything.
func (c *Cluster) checkNothingRemoved(t *testing.T, fn string) {
	t.Helper()
	claims := c.Claims()
	if len(claims) != c.Shape.Nodes || c.Instances() != c.Shape.Nodes {
		t.Fatalf("after a %s pass: %d claims and %d instances, want %d each", fn, len(claims), c.Instances(), c.Shape.Nodes)
	}
	for _, cl := range claims {
		if cl.Deleting() || cl.IsTrue(apis.ConditionDisrupting) {
			t.Fatalf("after a %s pass: claim %s is being removed", fn, cl.Name)
		}
	}
}

// provisioned is a provisioner pass's result, failing tb if it is not one.
func provisioned(tb testing.TB, res any) *provisioning.Result {
	tb.Helper()
	r, ok := res.(*provisioning.Result)
	if !ok {
		tb.Fatalf("provisioner result %T", res)
	}
	return r
}
