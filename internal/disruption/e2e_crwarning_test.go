package disruption_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/store"
)

// An interruptible Capacity Reservation takes one of its instances back
// (EC2's "Capacity Reservation Instance Interruption Warning", then
// termination two minutes later). As in Karpenter (its interruption
// controller handles the warning like a spot interruption and marks the
// reservation's offering unavailable): the node is tainted and drained, the
// claim deleted as interrupted, and the pods run again on a replacement that
// is not bought back in the reservation being reclaimed; the other reserved
// node stays.
func TestCapacityReservationWarningEndToEnd(t *testing.T) {
	e := newEnv(t, scenarioPool([]string{"m5.large"}, "WhenEmpty", "30m"))
	crID := useReservation(e)
	fn := startInterruptionFunction(e)

	e.deployment("web", 2, "1", int32p(1))
	e.launchAll("web")
	e.untilClaimsInitialized("web")
	before := e.claims()
	for _, cl := range before {
		if cl.Labels[apis.CapacityTypeLabelKey] != apis.CapacityTypeReserved || cl.Labels[apis.CapacityReservationIDLabelKey] != crID {
			t.Fatalf("claim %s is %s in %q; the reservation %s had room", cl.Name, cl.Labels[apis.CapacityTypeLabelKey],
				cl.Labels[apis.CapacityReservationIDLabelKey], crID)
		}
	}
	if len(before) != 2 {
		t.Fatalf("%d claims for two 1-CPU pods on m5.large, want 2", len(before))
	}
	victim := before[0]
	tainted := watchDisruptedTaint(e, victim.Status.NodeName)
	reclaimed := time.Now()
	if err := e.cloud.AWS.ReclaimCapacityReservation(victim.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	e.until("reservation interruption handled, pods running elsewhere", 100*time.Second, false, []string{"web"}, func() bool {
		if _, err := e.st.GetNodeClaim(e.ctx, victim.Name); !errors.Is(err, store.ErrNotFound) {
			return false
		}
		if _, err := e.cs.CoreV1().Nodes().Get(e.ctx, victim.Status.NodeName, metav1.GetOptions{}); err == nil {
			return false
		}
		total, running, _ := e.pods("web")
		return total == 2 && running == 2
	}, nil)

	if b, ok := fn.handled("EC2 Capacity Reservation Instance Interruption Warning"); !ok || b.err != nil || len(b.resp.BatchItemFailures) != 0 {
		t.Fatalf("the warning was not handled cleanly (seen %v): %+v", ok, b)
	}
	if tainted().IsZero() {
		t.Errorf("node %s never carried %s", victim.Status.NodeName, apis.DisruptedTaintKey)
	}
	if n := len(e.nodeEvents(interruption.ReasonCapacityReservationInterrupted)[victim.Status.NodeName]); n == 0 {
		t.Errorf("no %s event on node %s", interruption.ReasonCapacityReservationInterrupted, victim.Status.NodeName)
	}
	if len(fleetCallsSince(e, reclaimed)) == 0 {
		t.Fatal("no replacement CreateFleet after the warning")
	}
	assertReplacementOutsideReservation(t, e, before, victim, crID)
}

// assertReplacementOutsideReservation: the survivor kept its claim, and the
// victim's replacement is not in the reservation EC2 is reclaiming.
func assertReplacementOutsideReservation(t *testing.T, e *env, before []*apis.NodeClaim, victim *apis.NodeClaim, crID string) {
	t.Helper()
	var replacements int
	for _, cl := range e.claims() {
		if slices.ContainsFunc(before, func(b *apis.NodeClaim) bool { return b.Name == cl.Name }) {
			continue
		}
		replacements++
		if cl.Labels[apis.CapacityReservationIDLabelKey] == crID {
			t.Errorf("replacement %s launched into the reservation %s being reclaimed", cl.Name, crID)
		}
		t.Logf("replacement %s: %s %s", cl.Name, cl.Labels[catalog.LabelInstanceType], cl.Labels[apis.CapacityTypeLabelKey])
	}
	if replacements == 0 {
		t.Error("no replacement claim")
	}
	for _, cl := range before {
		if cl.Name == victim.Name {
			continue
		}
		if _, err := e.st.GetNodeClaim(e.ctx, cl.Name); err != nil {
			t.Errorf("the other reserved claim %s is gone: %v", cl.Name, err)
		}
	}
}

// useReservation adds an interruptible reservation of three m5.large in one of
// the env's zones, tagged for this pool only (the local cloud is shared), and
// points the pool and its class at it: reserved first, on-demand allowed.
// Two pods fill two slots; the third stays free, so only the reservation
// being marked unavailable keeps the replacement out of it.
func useReservation(e *env) string {
	e.t.Helper()
	nc := e.cfg.NodeClassFor(e.cfg.NodePool(e.pool))
	subnets, err := e.p.Subnets(e.ctx, nc)
	if err != nil {
		e.t.Fatal(err)
	}
	var zone string
	for z := range nwaws.ZonalSubnets(subnets) {
		if zone == "" || z < zone {
			zone = z
		}
	}
	id := e.cloud.AWS.EC2().AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zone, Count: 3, Interruptible: true,
		Tags: map[string]string{"nodewright-test": e.pool}})
	spec := e.spec
	spec.Requirements = slices.Clone(spec.Requirements)
	if spec.Requirements[0].Key != apis.CapacityTypeLabelKey {
		e.t.Fatalf("the package's pool no longer pins its capacity type first; adapt useReservation")
	}
	spec.Requirements[0] = apistest.In(apis.CapacityTypeLabelKey, apis.CapacityTypeReserved, apis.CapacityTypeOnDemand)
	class := cloudtest.NodeClassYAML("default", e.cloud.ClusterName) +
		"  capacityReservationSelectorTerms:\n    - tags: {nodewright-test: " + e.pool + "}\n"
	*e.cfg = *apistest.Load(e.t, spec.YAML()+class)
	return id
}
