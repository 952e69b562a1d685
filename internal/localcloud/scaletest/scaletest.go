// Package scaletest builds a large cluster on the local cloud for measuring
// nodewright's functions at scale: KWOK nodes registered as nodewright's own
// (a NodeClaim per node in the stack's DynamoDB table, a running instance
// per node in the EC2 simulator) across several NodePools, pods created
// already bound to them (spec.nodeName set, so the kube-scheduler is not
// what is measured) and a burst of pending pods for the provisioner.
//
// One real node per NodePool is provisioned and registered by the functions
// themselves; every other node, claim and instance is a copy of it with its
// own names and addresses, so the seeded cluster is what the functions
// would have built, only made in seconds. Objects are created concurrently
// (Shape.Workers at once), which makes 2,000 nodes and 40,000 pods a matter
// of minutes on two cores.
//
// It is test support: only _test files import it.
package scaletest

import (
	"fmt"
	"os"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// Shape is the size of a scale cluster.
type Shape struct {
	// Pools is how many NodePools the nodes are spread over (at most
	// len(instanceTypes)); each has one instance type.
	Pools int
	// Nodes is the number of nodes, PodsPerNode the pods bound to each.
	Nodes, PodsPerNode int
	// Pending is the size of the pending burst the provisioner places.
	Pending int
	// Workers bounds the objects created at once (default 48).
	Workers int
}

// Small is the size `make test` runs: 200 nodes, 4,000 pods, 500 pending.
func Small() Shape { return Shape{Pools: 4, Nodes: 200, PodsPerNode: 20, Pending: 500} }

// Full is the size: 2,000 nodes, 40,000 pods, 5,000 pending.
func Full() Shape { return Shape{Pools: 4, Nodes: 2000, PodsPerNode: 20, Pending: 5000} }

// Name is the shape as a sub-benchmark name ("200-nodes").
func (s Shape) Name() string { return fmt.Sprintf("%d-nodes", s.Nodes) }

// instanceTypes are the pools' instance types, one per pool, from the
// simulator's catalog.
var instanceTypes = []string{"m5.xlarge", "c5.xlarge", "c6g.xlarge", "m5.2xlarge"}

// PoolLabel is the label whose value names a node's pool; seeded and
// pending pods select their pool's nodes by it.
const PoolLabel = "nodewright.io/scale-pool"

// nodeClass is the one EC2NodeClass every pool refers to.
const nodeClass = "scale"

// poolNames are the shape's NodePools.
func (s Shape) poolNames() []string {
	out := make([]string, s.Pools)
	for i := range out {
		out[i] = fmt.Sprintf("scale-%d", i)
	}
	return out
}

// poolsYAML is the shape's NodePools. Half consolidate WhenEmpty (the
// lifecycle's), half WhenEmptyOrUnderutilized (the disruption function's):
// seeded nodes are filled so that no pod fits beside another node's pods,
// so neither function finds anything to remove, and a consolidateAfter of a
// few seconds makes the disruption function weigh every node all the same.
func (s Shape) poolsYAML() string {
	var docs []string
	for i, name := range s.poolNames() {
		p := apistest.Pool{
			Name: name, NodeClass: nodeClass, Labels: map[string]string{PoolLabel: name},
			Requirements: []apistest.Req{
				apistest.In(catalog.LabelInstanceType, instanceTypes[i%len(instanceTypes)]),
				apistest.In(apis.CapacityTypeLabelKey, "on-demand"),
			},
			ConsolidationPolicy: "WhenEmpty", ConsolidateAfter: "5s",
		}
		if i%2 == 1 {
			p.ConsolidationPolicy = "WhenEmptyOrUnderutilized"
		}
		docs = append(docs, p.YAML())
	}
	return apistest.Doc(docs...)
}

// envOptions are the cloudtest options of a scale cluster's Env.
func (s Shape) envOptions() []cloudtest.Option {
	return []cloudtest.Option{
		cloudtest.PoolName("scale"), cloudtest.NodeClass(nodeClass), cloudtest.PoolYAML(s.poolsYAML()),
		cloudtest.WorkQueue(), cloudtest.DisruptionQueue(), cloudtest.Timeout(2 * time.Hour),
	}
}

// NewShared is the local cloud a scale test package shares (hand its Main
// to TestMain): the functions' tests' short simulated delays, node leases
// of 20 minutes (renewed every 5: at the kubelet's 40 s, 2,000 KWOK nodes
// renew 200 leases a second, more writes than seeding makes; at 4 minutes
// the 33 a second still kept the API server, etcd and KWOK near a core
// busy, on the same two cores as the pass measured, where on AWS the
// kubelets' renewals are EKS's load), and an
// hour before a node whose lease KWOK has not renewed is marked unreachable:
// on a loaded machine KWOK falls minutes behind, and the controller
// manager would then evict a seeded node's pods (no node dies in a scale
// test; a node emptied that way is one the lifecycle removes). Launched
// instances run and register as the simulator's defaults have them (5 s
// pending, then 10 s to register; AWS takes longer): with the functions'
// tests' 200 ms each, the kubelet emulator registered a burst's nodes while
// the provisioner's pass was still launching, and the API server, KWOK and
// the controller manager serving them took the pass's CPU on this machine,
// where on AWS they run on other machines long after the pass.
func NewShared() *localcloud.Shared {
	return cloudtest.NewShared("scale", func(o *localcloud.Options) {
		o.NodeLease, o.NodeGrace = 20*time.Minute, time.Hour
		o.Sim.Delays.Pending, o.Sim.Delays.NodeRegistration = RunningAfter, RegisteredAfter
		// For the API server's profile of a pass (profile_test.go).
		o.APIServerProfiling = os.Getenv("NODEWRIGHT_SCALE_SERVER_PROFILE") != ""
	})
}

// RunningAfter and RegisteredAfter are how long a launched instance of the
// scale cloud stays pending and then takes to register its Node.
const (
	RunningAfter    = 5 * time.Second
	RegisteredAfter = 10 * time.Second
)

// NodesFor is how many nodes n pending pods need, spread over the pools as
// Burst spreads them: the fewest that hold PodsPerNode pods each.
func (s Shape) NodesFor(n int) int {
	total := 0
	for i := range s.Pools {
		pods := n / s.Pools
		if i < n%s.Pools {
			pods++
		}
		total += (pods + s.PodsPerNode - 1) / s.PodsPerNode
	}
	return total
}
