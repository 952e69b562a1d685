package localrun

import (
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
)

func TestTargetOf(t *testing.T) {
	load := func(yaml string) *apis.Config {
		t.Helper()
		cfg, err := apis.LoadData("c.yaml", []byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	pool := func(name, zones string) string {
		return `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ` + name + `}
spec:
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
      requirements:
        - {key: topology.kubernetes.io/zone, operator: In, values: [` + zones + `]}
---
`
	}
	class := func(cluster string) string {
		return `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: default}
spec:
  role: KarpenterNodeRole-` + strings.Trim(cluster, "${}") + `
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: "` + cluster + `"}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: "` + cluster + `"}}]
`
	}
	got := TargetOf(load(pool("a", "eu-west-1a, eu-west-1b") + pool("b", "eu-west-1c") + class("prod")))
	if want := (Target{ClusterName: "prod", NodeRole: "KarpenterNodeRole-prod"}); got != want {
		t.Errorf("TargetOf = %+v, want %+v", got, want)
	}
	// An unexpanded placeholder keeps the default.
	got = TargetOf(load(pool("a", "eu-west-1a") + class("${CLUSTER_NAME}")))
	if got.ClusterName != "" {
		t.Errorf("TargetOf = %+v, want no cluster", got)
	}
}

func TestStatusString(t *testing.T) {
	s := Status{Pending: 3, Nodes: map[string]int{"steady/on-demand": 1, "general/spot": 2}, Instances: 3, CostPerHour: 0.42101}
	if got, want := s.String(), "pending pods 3 | nodes general/spot=2 steady/on-demand=1 | instances 3 | $0.4210/h"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got := (Status{}).String(); got != "pending pods 0 | nodes none | instances 0 | $0.0000/h" {
		t.Errorf("empty status %q", got)
	}
}
