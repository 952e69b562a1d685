package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
)

// A claim from a pool that requires a custom key with several values (or
// Exists) carries the value the plan picked for it, as Karpenter labels its
// NodeClaims (nodeclaimtemplate.go resolveCustomLabelsFromRequirements), so
// the node registers with it and pods requiring the key can run there; the
// next pass sees the in-flight claim with it and buys nothing more.
func TestClaimCarriesPickedCustomLabel(t *testing.T) {
	ps := pods("web", 2, "500m", "512Mi")
	for _, p := range ps {
		p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "rack", Operator: corev1.NodeSelectorOpExists}}}}}}}
	}
	e := newEnv(t, poolOpts{}, ps)
	pool := apistest.Pool{Requirements: []apistest.Req{
		apistest.In(catalog.LabelInstanceType, "m5.large", "m5.xlarge"), apistest.In(catalog.LabelCapacityType, "on-demand"),
		apistest.In(catalog.LabelTopologyZone, "us-west-2a", "us-west-2b"), apistest.In("rack", "r2", "r1")}}
	e.cfg = apistest.Load(t, apistest.Doc(pool.YAML(), apistest.NodeClass{}.YAML()))
	res := e.run(Trigger{Source: TriggerSchedule})
	claims := e.store.live()
	if len(res.Launched) != 1 || len(claims) != 1 {
		t.Fatalf("result %+v", res)
	}
	if got := claims[0].Labels["rack"]; got != "r1" {
		t.Errorf("claim label rack=%q, want r1 (labels %v)", got, claims[0].Labels)
	}
	if res := e.run(Trigger{Source: TriggerSchedule}); len(res.Created) != 0 {
		t.Errorf("second pass created %d claims: the in-flight claim did not carry the label", len(res.Created))
	}
}
