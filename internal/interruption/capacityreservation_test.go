package interruption

import (
	"context"
	"fmt"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/termination"
)

func capacityReservationWarning(instance string) string {
	return fmt.Sprintf(`{"version":"0","id":"crw","detail-type":"EC2 Capacity Reservation Instance Interruption Warning","source":"aws.ec2",`+
		`"time":"2026-11-22T00:00:00Z","detail":{"instance-id":%q,"instance-action":"terminate","instance-termination-time":"2026-11-22T00:02:00Z","azId":"usw2-az1"}}`, instance)
}

// TestCapacityReservationWarningDrains: an instance of an interruptible
// Capacity Reservation EC2 takes back is handled as Karpenter-AWS v1.14.1
// does (interruption/utils.go: CordonAndDrain, the reservation marked
// unavailable, a CapacityReservationInstanceInterrupted event): the claim is
// marked, the reservation kept out of the replacement pass, the node
// cordoned and tainted before it, and the drain handed to the lifecycle.
func TestCapacityReservationWarningDrains(t *testing.T) {
	f := newFixture(t, "")
	const reservation = "cr-56fac701cc1951b03"
	if _, err := f.st.MutateNodeClaim(context.Background(), claimName, func(c *apis.NodeClaim) error {
		c.Labels[apis.CapacityTypeLabelKey] = apis.CapacityTypeReserved
		c.Labels[apis.CapacityReservationIDLabelKey] = reservation
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := nwaws.OfferingKey{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: apis.CapacityTypeReserved, ReservationID: reservation}
	var markedBeforePass, cordonedBeforePass bool
	f.passFn = func(int) (provisioning.Result, error) {
		markedBeforePass = len(f.ice.keys) == 1 && f.ice.keys[0] == want
		n := f.node(t)
		cordonedBeforePass = n.Spec.Unschedulable && termination.HasDisruptedTaint(n)
		return provisioning.Result{Launched: []string{"default-repl"}}, nil
	}
	if got := failures(f.handle(t, capacityReservationWarning(instanceID))); len(got) != 0 {
		t.Fatalf("failures %v", got)
	}
	cl, _ := f.st.GetNodeClaim(context.Background(), claimName)
	if !cl.Deleting() || cl.DeletionReason() != apis.DeletionReasonInterrupted {
		t.Fatalf("claim not marked: %+v", cl.ObjectMeta)
	}
	if f.passes != 1 || !markedBeforePass || !cordonedBeforePass {
		t.Errorf("pass %d: reservation marked %v (ICE %v), node cordoned and tainted %v; want both before one pass",
			f.passes, markedBeforePass, f.ice.keys, cordonedBeforePass)
	}
	if len(f.requeued) != 1 || f.requeued[0].Kind != queue.KindLifecycle || f.requeued[0].Subject != claimName {
		t.Errorf("requeued %+v", f.requeued)
	}
	if got := f.events(t, ReasonCapacityReservationInterrupted); got != 1 {
		t.Errorf("%d %s events, want 1", got, ReasonCapacityReservationInterrupted)
	}
}

// A spot warning marks only the spot offering, and a reservation warning
// of a claim without its reservation label marks nothing.
func TestCapacityReservationWarningWithoutReservationLabel(t *testing.T) {
	f := newFixture(t, "")
	if _, err := f.st.MutateNodeClaim(context.Background(), claimName, func(c *apis.NodeClaim) error {
		c.Labels[apis.CapacityTypeLabelKey] = apis.CapacityTypeReserved
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := failures(f.handle(t, capacityReservationWarning(instanceID))); len(got) != 0 {
		t.Fatalf("failures %v", got)
	}
	if len(f.ice.keys) != 0 {
		t.Errorf("ICE %v, want nothing marked", f.ice.keys)
	}
	if n := f.node(t); !n.Spec.Unschedulable {
		t.Error("node not cordoned")
	}
}
