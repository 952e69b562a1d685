package lifecycle_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
)

// Capacity reservations end to end, as Karpenter v1.14 uses them: a pool
// that allows reserved and on-demand capacity fills a reservation of two
// first (two nodes labelled reserved with the reservation's id and type)
// and launches the third node on demand; a second run launches nothing;
// when the reservation expires its instances keep running and the
// lifecycle relabels their claims and Nodes on-demand.
func TestCapacityReservationUsedFirstAndRelabelledWhenItEnds(t *testing.T) {
	pool := apistest.Pool{Name: "odcr", Requirements: []apistest.Req{
		apistest.In(apis.CapacityTypeLabelKey, apis.CapacityTypeReserved, apis.CapacityTypeOnDemand),
		apistest.In("node.kubernetes.io/instance-type", "m5.large"),
	}}
	e := newEnv(t, withConfig(pool.YAML()))
	tag := fmt.Sprintf("odcr-%d", e.id) // the package's tests share one region
	zone := e.cat.Zones[1].Name
	sim := e.cloud.AWS.EC2()
	id := sim.AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: zone, Count: 2, Tags: map[string]string{"nodewright.io/test": tag}})
	t.Cleanup(func() { _ = sim.EndCapacityReservation(id, "cancelled") })
	e.cfg.NodeClass("default").Spec.CapacityReservationSelectorTerms = []apis.CapacityReservationSelectorTerm{{Tags: map[string]string{"nodewright.io/test": tag}}}

	h := e.handler(e.deps())
	prov := e.provisioner(provisioning.ForNodeClasses(provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil), e.p, e.cfg))
	e.deployOnePerNode("reserved", "odcr", 3)
	e.provision(prov, 3)
	e.provision(prov, 0) // a second run launches nothing more

	reserved := e.claimsByCapacityType()
	if len(reserved[apis.CapacityTypeReserved]) != 2 || len(reserved[apis.CapacityTypeOnDemand]) != 1 {
		t.Fatalf("claims by capacity type: %v, want 2 reserved and 1 on-demand", reserved)
	}
	for _, cl := range reserved[apis.CapacityTypeReserved] {
		if cl.Labels[apis.CapacityReservationIDLabelKey] != id || cl.Labels[apis.CapacityReservationTypeLabelKey] != "default" ||
			cl.Labels["topology.kubernetes.io/zone"] != zone {
			t.Errorf("reserved claim %s labels %v", cl.Name, cl.Labels)
		}
		if inst, _, _ := sim.Instance(cl.Status.InstanceID); inst.CapacityReservationId == nil || *inst.CapacityReservationId != id {
			t.Errorf("claim %s's instance is not in reservation %s", cl.Name, id)
		}
	}
	if od := reserved[apis.CapacityTypeOnDemand][0]; od.Labels[apis.CapacityReservationIDLabelKey] != "" {
		t.Errorf("on-demand claim carries a reservation: %v", od.Labels)
	}

	// The nodes register with the claims' labels.
	e.pump(h, "three registered nodes", func() bool { return e.nodesWith(apis.CapacityReservationIDLabelKey, id) == 2 && e.registered() == 3 })

	// The reservation expires: its instances run on as on-demand ones.
	if err := sim.EndCapacityReservation(id, "expired"); err != nil {
		t.Fatal(err)
	}
	e.tick(h)
	e.pump(h, "reserved claims relabelled on-demand", func() bool {
		if byCT := e.claimsByCapacityType(); len(byCT[apis.CapacityTypeOnDemand]) == 3 {
			return e.nodesWith(apis.CapacityTypeLabelKey, apis.CapacityTypeOnDemand) == 3 && e.nodesWith(apis.CapacityReservationIDLabelKey, id) == 0
		}
		e.tick(h)
		return false
	})
	for _, cl := range e.claimsByCapacityType()[apis.CapacityTypeOnDemand] {
		if cl.Labels[apis.CapacityReservationIDLabelKey] != "" || cl.Labels[apis.CapacityReservationTypeLabelKey] != "" || cl.Deleting() {
			t.Errorf("claim %s after the reservation ended: labels %v, marked %v", cl.Name, cl.Labels, cl.Deleting())
		}
	}
}

// provisioner is a provisioner over the env's clients, batching as the
// end-to-end tests do; cat nil is the provider's catalog.
func (e *env) provisioner(cat func(context.Context) (*catalog.Catalog, error)) *provisioning.Provisioner {
	e.t.Helper()
	if cat == nil {
		cat = provisioning.ProviderCatalog(e.p, nil, e.cloud.Region, nil)
	}
	prov, err := provisioning.New(provisioning.Deps{
		Store: e.st, Cluster: e.kc, Launcher: e.p, Config: e.cfg, Now: e.clock.Now, Catalog: cat,
		Unavailable: provisioning.ProviderICE(e.p), Requeue: e.requeueVia(e.sqs),
		Settings: provisioning.Settings{BatchIdle: 200 * time.Millisecond, BatchMax: 2 * time.Second, RegistrationCheck: time.Second},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return prov
}

// provision runs one manual provisioning pass and checks it launched want
// claims.
func (e *env) provision(prov *provisioning.Provisioner, want int) {
	e.t.Helper()
	res, err := prov.Run(e.ctx, provisioning.Trigger{Source: provisioning.TriggerManual})
	if err != nil || len(res.Launched) != want {
		e.t.Fatalf("provisioner run: %+v %v, want %d launched", res, err, want)
	}
}

// deployOnePerNode deploys n pods of app that select pool, one per
// m5.large (1.5 of its 2 vCPU), and waits until they are Unschedulable.
func (e *env) deployOnePerNode(app, pool string, n int32) {
	e.t.Helper()
	cloudtest.Workload{Name: app, Replicas: n, CPU: "1500m", Memory: "1Gi", NodeSelector: map[string]string{apis.NodePoolLabelKey: pool},
		GraceSeconds: new(int64(0)), NoServiceAccountToken: true}.Deploy(e.ctx, e.t, e.cs, e.ns)
	e.awaitPending("app="+app, int(n))
}

// awaitPending waits until n pods matching selector are Unschedulable.
func (e *env) awaitPending(selector string, n int) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err := e.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			e.t.Fatal(err)
		}
		pending := 0
		for _, p := range list.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
					pending++
				}
			}
		}
		if pending == n {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%d of %d pods Unschedulable after 60 s", pending, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// claimsByCapacityType lists the live claims by their capacity-type label.
func (e *env) claimsByCapacityType() map[string][]*apis.NodeClaim {
	e.t.Helper()
	claims, err := e.st.ListNodeClaims(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]*apis.NodeClaim{}
	for _, cl := range claims {
		ct := cl.Labels[apis.CapacityTypeLabelKey]
		out[ct] = append(out[ct], cl)
	}
	return out
}

// nodesWith counts the claims' Nodes labelled key=value.
func (e *env) nodesWith(key, value string) int {
	e.t.Helper()
	n := 0
	for _, cls := range e.claimsByCapacityType() {
		for _, cl := range cls {
			if cl.Status.NodeName == "" {
				continue
			}
			node, err := e.cs.CoreV1().Nodes().Get(e.ctx, cl.Status.NodeName, metav1.GetOptions{})
			if err == nil && node.Labels[key] == value {
				n++
			}
		}
	}
	return n
}

// registered counts the claims registered with a Node.
func (e *env) registered() int {
	n := 0
	for _, cls := range e.claimsByCapacityType() {
		for _, cl := range cls {
			if cl.IsTrue(apis.ConditionRegistered) {
				n++
			}
		}
	}
	return n
}
