package apis

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The karpenter.sh/v1beta1 and karpenter.k8s.aws/v1beta1 shapes, used only
// to read older files strictly before converting them to v1.

// betaObject is a v1beta1 document: the object envelope both kinds share
// around their own spec.
type betaObject[S any] struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              S `json:"spec"`
}

type (
	betaNodePool     = betaObject[betaNodePoolSpec]
	betaEC2NodeClass = betaObject[betaEC2NodeClassSpec]
)

type betaNodePoolSpec struct {
	Template   betaNodeClaimTemplate `json:"template"`
	Disruption *betaDisruption       `json:"disruption,omitempty"`
	Limits     Limits                `json:"limits,omitempty"`
	Weight     *int32                `json:"weight,omitempty"`
}

type betaNodeClaimTemplate struct {
	ObjectMeta TemplateObjectMeta    `json:"metadata,omitempty"`
	Spec       betaNodeClaimTmplSpec `json:"spec"`
}

type betaNodeClaimTmplSpec struct {
	Requirements  []NodeSelectorRequirementWithMinValues `json:"requirements"`
	Taints        []corev1.Taint                         `json:"taints,omitempty"`
	StartupTaints []corev1.Taint                         `json:"startupTaints,omitempty"`
	Kubelet       *KubeletConfiguration                  `json:"kubelet,omitempty"`
	NodeClassRef  *betaNodeClassReference                `json:"nodeClassRef"`
}

type betaNodeClassReference struct {
	Kind       string `json:"kind,omitempty"`
	Name       string `json:"name"`
	APIVersion string `json:"apiVersion,omitempty"`
}

type betaDisruption struct {
	ConsolidateAfter    NillableDuration    `json:"consolidateAfter,omitzero"`
	ConsolidationPolicy ConsolidationPolicy `json:"consolidationPolicy,omitempty"`
	ExpireAfter         NillableDuration    `json:"expireAfter,omitzero"`
	Budgets             []Budget            `json:"budgets,omitempty"`
}

// betaEC2NodeClassSpec is the v1 spec with v1beta1's AMI selector terms
// (no alias or ssmParameter); the fields v1 added are refused after
// decoding (betaNodeClassV1Only) so a v1beta1 file stays strictly v1beta1.
type betaEC2NodeClassSpec struct {
	EC2NodeClassSpec `json:",inline"`
	AMISelectorTerms []betaAMISelectorTerm `json:"amiSelectorTerms,omitempty"`
}

// betaNodeClassV1Only are the spec fields karpenter.k8s.aws/v1 added.
var betaNodeClassV1Only = []string{
	"kubelet", "capacityReservationSelectorTerms", "placementGroupSelector",
	"ipPrefixCount", "networkInterfaces", "connectionTracking", "cpuOptions",
}

type betaAMISelectorTerm struct {
	Tags  map[string]string `json:"tags,omitempty"`
	ID    string            `json:"id,omitempty"`
	Name  string            `json:"name,omitempty"`
	Owner string            `json:"owner,omitempty"`
}

// conversion collects what converting one v1beta1 document did: warnings,
// errors, and where v1 fields came from so messages point at what the user
// wrote.
type conversion struct {
	warnings []fieldErr
	errs     []fieldErr
	// renames maps a v1 field path prefix to the v1beta1 path it came from.
	renames map[string]string
}

func newConversion() *conversion { return &conversion{renames: map[string]string{}} }

func (c *conversion) warn(path, format string, args ...any) {
	c.warnings = append(c.warnings, fieldErr{path: path, msg: fmt.Sprintf(format, args...)})
}

// original maps a v1 path back to the path written in the v1beta1 document.
func (c *conversion) original(path string) string {
	if c == nil {
		return path
	}
	for v1p, betap := range c.renames {
		if path == v1p || strings.HasPrefix(path, v1p+".") || strings.HasPrefix(path, v1p+"[") {
			return betap + path[len(v1p):]
		}
	}
	return path
}

// convertNodePool converts a v1beta1 NodePool the way Karpenter's conversion
// webhook does. The template kubelet is returned separately: v1 keeps it on
// the EC2NodeClass, and the loader moves it there once all classes are read.
func convertNodePool(in *betaNodePool, present func(string) bool, c *conversion) (*NodePool, *KubeletConfiguration) {
	out := &NodePool{ObjectMeta: in.ObjectMeta}
	out.APIVersion, out.Kind = NodePoolAPIV1, NodePoolKind
	out.Spec.Limits = in.Spec.Limits
	out.Spec.Weight = in.Spec.Weight
	t := in.Spec.Template
	out.Spec.Template.ObjectMeta = t.ObjectMeta
	out.Spec.Template.Spec = NodeClaimTemplateSpec{
		Requirements:  t.Spec.Requirements,
		Taints:        t.Spec.Taints,
		StartupTaints: t.Spec.StartupTaints,
	}
	if ref := t.Spec.NodeClassRef; ref != nil {
		group := AWSGroup
		if ref.APIVersion != "" {
			group, _, _ = strings.Cut(ref.APIVersion, "/")
		}
		kind := ref.Kind
		if kind == "" {
			kind = EC2NodeClassKind
		}
		out.Spec.Template.Spec.NodeClassRef = &NodeClassReference{Group: group, Kind: kind, Name: ref.Name}
		if ref.APIVersion != "" {
			c.renames["spec.template.spec.nodeClassRef.group"] = "spec.template.spec.nodeClassRef.apiVersion"
		}
	}

	// v1beta1 defaults: disruption {consolidationPolicy: WhenUnderutilized,
	// expireAfter: 720h}.
	d := in.Spec.Disruption
	if d == nil {
		d = &betaDisruption{}
	}
	policy := d.ConsolidationPolicy
	if policy == "" {
		policy = consolidationPolicyWhenUnderutilizedBeta
	}
	switch policy {
	case consolidationPolicyWhenUnderutilizedBeta:
		out.Spec.Disruption.ConsolidationPolicy = ConsolidationPolicyWhenEmptyOrUnderutilized
		if present("spec.disruption.consolidationPolicy") {
			c.warn("spec.disruption.consolidationPolicy", "WhenUnderutilized is WhenEmptyOrUnderutilized in karpenter.sh/v1")
		}
		if d.ConsolidateAfter.IsZero() {
			// WhenUnderutilized consolidated as soon as possible.
			out.Spec.Disruption.ConsolidateAfter = DurationOf(0)
		} else {
			out.Spec.Disruption.ConsolidateAfter = d.ConsolidateAfter
			if !d.ConsolidateAfter.Never {
				c.warn("spec.disruption.consolidateAfter", "v1beta1 rejected consolidateAfter with consolidationPolicy WhenUnderutilized; kept as the v1 WhenEmptyOrUnderutilized delay")
			}
		}
	case ConsolidationPolicyWhenEmpty:
		out.Spec.Disruption.ConsolidationPolicy = policy
		out.Spec.Disruption.ConsolidateAfter = d.ConsolidateAfter
		if d.ConsolidateAfter.IsZero() {
			c.errs = append(c.errs, fieldErr{path: "spec.disruption.consolidateAfter", msg: "consolidateAfter must be specified with consolidationPolicy=WhenEmpty"})
		}
	default:
		// Leave it for v1 validation, which names the allowed values.
		out.Spec.Disruption.ConsolidationPolicy = policy
		out.Spec.Disruption.ConsolidateAfter = d.ConsolidateAfter
	}
	out.Spec.Disruption.Budgets = d.Budgets
	if !d.ExpireAfter.IsZero() {
		out.Spec.Template.Spec.ExpireAfter = d.ExpireAfter
		c.renames["spec.template.spec.expireAfter"] = "spec.disruption.expireAfter"
		c.warn("spec.disruption.expireAfter", "moved to spec.template.spec.expireAfter in karpenter.sh/v1")
	}
	return out, t.Spec.Kubelet
}

var betaFamilyAliases = map[string]string{
	AMIFamilyAL2:          "al2@latest",
	AMIFamilyAL2023:       "al2023@latest",
	AMIFamilyBottlerocket: "bottlerocket@latest",
	AMIFamilyWindows2019:  "windows2019@latest",
	AMIFamilyWindows2022:  "windows2022@latest",
}

// convertEC2NodeClass converts a v1beta1 EC2NodeClass the way Karpenter's
// conversion webhook does: an amiFamily without amiSelectorTerms becomes the
// family's "@latest" alias; Ubuntu (gone in v1) becomes AL2 with the given
// amiSelectorTerms.
func convertEC2NodeClass(in *betaEC2NodeClass, present func(string) bool, c *conversion) *EC2NodeClass {
	s := in.Spec
	out := &EC2NodeClass{ObjectMeta: in.ObjectMeta}
	out.APIVersion, out.Kind = NodeClassAPIV1, EC2NodeClassKind
	out.Spec = s.EC2NodeClassSpec
	out.Spec.AMISelectorTerms = nil
	for _, f := range betaNodeClassV1Only {
		if present("spec." + f) {
			c.errs = append(c.errs, fieldErr{path: "spec." + f, msg: "exists only in karpenter.k8s.aws/v1: set apiVersion: karpenter.k8s.aws/v1 to use it"})
		}
	}
	for _, t := range s.AMISelectorTerms {
		out.Spec.AMISelectorTerms = append(out.Spec.AMISelectorTerms, AMISelectorTerm{Tags: t.Tags, ID: t.ID, Name: t.Name, Owner: t.Owner})
	}
	if s.AMIFamily == nil {
		c.errs = append(c.errs, fieldErr{path: "spec.amiFamily", msg: "required field is missing (karpenter.k8s.aws/v1beta1 needs amiFamily)"})
		return out
	}
	fam := *s.AMIFamily
	switch {
	case fam == amiFamilyUbuntuBeta && len(s.AMISelectorTerms) == 0:
		c.errs = append(c.errs, fieldErr{path: "spec.amiFamily", msg: "Ubuntu has no karpenter.k8s.aws/v1 alias: set amiSelectorTerms for your Ubuntu AMIs (it then converts to amiFamily AL2)"})
	case fam == amiFamilyUbuntuBeta:
		al2 := AMIFamilyAL2
		out.Spec.AMIFamily = &al2
		c.warn("spec.amiFamily", "Ubuntu is not an AMI family in karpenter.k8s.aws/v1; converted to AL2 with the given amiSelectorTerms")
	case fam == AMIFamilyCustom && len(s.AMISelectorTerms) == 0:
		c.errs = append(c.errs, fieldErr{path: "spec.amiSelectorTerms", msg: "amiSelectorTerms is required when amiFamily == 'Custom'"})
	case len(s.AMISelectorTerms) == 0:
		alias, ok := betaFamilyAliases[fam]
		if !ok {
			// Unknown family: v1 validation reports the allowed values.
			return out
		}
		out.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: alias}}
		out.Spec.AMIFamily = nil
		c.warn("spec.amiFamily", "amiFamily %s without amiSelectorTerms is amiSelectorTerms [{alias: %s}] in karpenter.k8s.aws/v1", fam, alias)
	}
	return out
}
