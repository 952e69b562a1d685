package apis

import "time"

// Default values Karpenter v1 applies (CRD defaults).
const (
	DefaultExpireAfter             = 720 * time.Hour
	DefaultConsolidateAfter        = time.Duration(0)
	DefaultConsolidationPolicy     = ConsolidationPolicyWhenEmptyOrUnderutilized
	DefaultHTTPEndpoint            = "enabled"
	DefaultHTTPProtocolIPv6        = "disabled"
	DefaultHTTPPutResponseHopLimit = int64(1)
	DefaultHTTPTokens              = "required"
)

// SetDefaults fills in what Karpenter's v1 CRD defaults: consolidateAfter 0s,
// consolidationPolicy WhenEmptyOrUnderutilized, budgets [{nodes: 10%}] (and
// nodes 10% in a budget without nodes), expireAfter 720h. nodeClassRef group
// and kind default to karpenter.k8s.aws / EC2NodeClass, the only class
// nodewright supports (Karpenter requires them written out). Explicit values,
// including "Never" and an explicit empty budgets list, are kept.
func (np *NodePool) SetDefaults() {
	if np.APIVersion == "" {
		np.APIVersion = NodePoolAPIV1
	}
	if np.Kind == "" {
		np.Kind = NodePoolKind
	}
	d := &np.Spec.Disruption
	if d.ConsolidateAfter.IsZero() {
		d.ConsolidateAfter = DurationOf(DefaultConsolidateAfter)
	}
	if d.ConsolidationPolicy == "" {
		d.ConsolidationPolicy = DefaultConsolidationPolicy
	}
	if d.Budgets == nil {
		d.Budgets = []Budget{{Nodes: DefaultNodesRatio}}
	}
	for i := range d.Budgets {
		if d.Budgets[i].Nodes == "" {
			d.Budgets[i].Nodes = DefaultNodesRatio
		}
	}
	ts := &np.Spec.Template.Spec
	if ts.ExpireAfter.IsZero() {
		ts.ExpireAfter = DurationOf(DefaultExpireAfter)
	}
	if ts.Requirements == nil {
		ts.Requirements = []NodeSelectorRequirementWithMinValues{}
	}
	if ref := ts.NodeClassRef; ref != nil {
		if ref.Group == "" {
			ref.Group = AWSGroup
		}
		if ref.Kind == "" {
			ref.Kind = EC2NodeClassKind
		}
	}
}

// SetDefaults fills in what Karpenter's v1 CRD defaults: metadataOptions
// {httpEndpoint: enabled, httpProtocolIPv6: disabled,
// httpPutResponseHopLimit: 1, httpTokens: required}, each field on its own
// when metadataOptions is partly given.
func (nc *EC2NodeClass) SetDefaults() {
	if nc.APIVersion == "" {
		nc.APIVersion = NodeClassAPIV1
	}
	if nc.Kind == "" {
		nc.Kind = EC2NodeClassKind
	}
	if nc.Spec.MetadataOptions == nil {
		nc.Spec.MetadataOptions = &MetadataOptions{}
	}
	m := nc.Spec.MetadataOptions
	if m.HTTPEndpoint == nil {
		m.HTTPEndpoint = ptr(DefaultHTTPEndpoint)
	}
	if m.HTTPProtocolIPv6 == nil {
		m.HTTPProtocolIPv6 = ptr(DefaultHTTPProtocolIPv6)
	}
	if m.HTTPPutResponseHopLimit == nil {
		m.HTTPPutResponseHopLimit = ptr(DefaultHTTPPutResponseHopLimit)
	}
	if m.HTTPTokens == nil {
		m.HTTPTokens = ptr(DefaultHTTPTokens)
	}
}

func ptr[T any](v T) *T { return &v }
