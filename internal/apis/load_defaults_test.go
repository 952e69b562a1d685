package apis

import (
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	doc := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: minimal
spec:
  template:
    spec:
      requirements: []
      nodeClassRef:
        name: default
---
` + class
	cfg, err := LoadData("min.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	np := cfg.NodePool("minimal")
	if d, ok := np.Spec.Template.Spec.ExpireAfter.Get(); !ok || d != 720*time.Hour {
		t.Errorf("expireAfter %v", np.Spec.Template.Spec.ExpireAfter)
	}
	if d, ok := np.Spec.Disruption.ConsolidateAfter.Get(); !ok || d != 0 {
		t.Errorf("consolidateAfter %v", np.Spec.Disruption.ConsolidateAfter)
	}
	if np.Spec.Disruption.ConsolidationPolicy != ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("policy %v", np.Spec.Disruption.ConsolidationPolicy)
	}
	if len(np.Spec.Disruption.Budgets) != 1 || np.Spec.Disruption.Budgets[0].Nodes != "10%" {
		t.Errorf("budgets %+v", np.Spec.Disruption.Budgets)
	}
	if ref := np.Spec.Template.Spec.NodeClassRef; ref.Group != AWSGroup || ref.Kind != EC2NodeClassKind {
		t.Errorf("nodeClassRef %+v", ref)
	}
	m := cfg.NodeClass("default").Spec.MetadataOptions
	if *m.HTTPEndpoint != "enabled" || *m.HTTPProtocolIPv6 != "disabled" || *m.HTTPPutResponseHopLimit != 1 || *m.HTTPTokens != "required" {
		t.Errorf("metadataOptions %+v", m)
	}

	// Partial metadataOptions get per-field defaults; explicit values stay.
	nc := &EC2NodeClass{Spec: EC2NodeClassSpec{MetadataOptions: &MetadataOptions{HTTPTokens: ptr("optional")}}}
	nc.SetDefaults()
	if *nc.Spec.MetadataOptions.HTTPTokens != "optional" || *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit != 1 {
		t.Errorf("partial defaults %+v", nc.Spec.MetadataOptions)
	}
	// Never and explicit empty budgets are kept.
	p := &NodePool{Spec: NodePoolSpec{Disruption: Disruption{ConsolidateAfter: NeverDuration(), Budgets: []Budget{}}}}
	p.Spec.Template.Spec.ExpireAfter = NeverDuration()
	p.SetDefaults()
	if !p.Spec.Disruption.ConsolidateAfter.Never || !p.Spec.Template.Spec.ExpireAfter.Never || len(p.Spec.Disruption.Budgets) != 0 {
		t.Errorf("explicit values overwritten: %+v", p.Spec)
	}
}

func TestStatusIsIgnored(t *testing.T) {
	doc := pool + "status:\n  resources:\n    cpu: \"4\"\n  conditions: []\n---\n" + class
	cfg, err := LoadData("exported.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 1 || cfg.Warnings[0].String() != "exported.yaml:40: status: ignored in 1 object: status (written by the API server and controllers, not configuration)" {
		t.Errorf("warnings %v", cfg.Warnings)
	}
}
