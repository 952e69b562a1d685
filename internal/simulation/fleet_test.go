package simulation

import (
	"bytes"
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// Nodes are priced by their labels: Karpenter's capacity type, else EKS
// managed node groups', else on-demand; a zone the catalog lacks takes the
// type's cheapest offering; a node of unknown type counts $0 and is named.
func TestFleetPricesNodesByTheirLabels(t *testing.T) {
	cat, err := catalog.Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	const typ, zone = "m5.large", "us-east-1a"
	od, _ := cat.NodePrice(typ, zone, "on-demand")
	spot, _ := cat.NodePrice(typ, zone, "spot")
	if od == 0 || spot == 0 || spot >= od {
		t.Fatalf("catalog: %s on-demand $%v, spot $%v", typ, od, spot)
	}
	f := Fleet(cat, []*corev1.Node{
		node("karpenter", map[string]string{catalog.LabelInstanceType: typ, catalog.LabelTopologyZone: zone, catalog.LabelCapacityType: "on-demand"}),
		node("mng-spot", map[string]string{catalog.LabelInstanceType: typ, catalog.LabelTopologyZone: zone, "eks.amazonaws.com/capacityType": "SPOT"}),
		node("elsewhere", map[string]string{catalog.LabelInstanceType: typ, catalog.LabelTopologyZone: "us-east-1z"}),
		node("bare", nil),
	}, map[string]int{"karpenter": 3})
	got := map[string]FleetNodeOutput{}
	for _, n := range f.Nodes {
		got[n.Name] = n
	}
	if got["karpenter"].PricePerHour != od || got["karpenter"].Pods != 3 || got["mng-spot"].PricePerHour != spot ||
		got["mng-spot"].CapacityType != "spot" || got["elsewhere"].PricePerHour != od || got["bare"].PricePerHour != 0 {
		t.Fatalf("fleet %+v", f.Nodes)
	}
	if math.Abs(f.CostPerHour-(2*od+spot)) > 1e-9 || len(f.Unpriced) != 1 || f.Unpriced[0] != "bare" {
		t.Fatalf("cost $%v (want $%v), unpriced %v", f.CostPerHour, 2*od+spot, f.Unpriced)
	}

	f.PendingPods = 2
	var b bytes.Buffer
	out := NewOutput(cat, &scheduling.Plan{})
	out.CurrentFleet = f
	if err := WriteTable(&b, out, cat); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CURRENT NODE", "current fleet: 4 node(s)", "from-scratch plan: $0.0000/hour ($0.00/month), 100% less",
		"the current nodes leave 2 pod(s) pending", "note: 1 node(s) count $0, their instance type is not in the catalog: bare"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
