package apis

import (
	"fmt"
	"strings"
	"testing"
)

const betaPool = `apiVersion: karpenter.sh/v1beta1
kind: NodePool
metadata:
  name: %s
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
      kubelet:
        maxPods: %d
      nodeClassRef:
        apiVersion: karpenter.k8s.aws/v1beta1
        kind: EC2NodeClass
        name: default
  disruption:
    consolidationPolicy: WhenUnderutilized
    expireAfter: Never
`

const betaClass = `apiVersion: karpenter.k8s.aws/v1beta1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiFamily: Bottlerocket
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
`

func sprintf(format string, args ...any) string {
	return strings.TrimSpace(fmt.Sprintf(format, args...)) + "\n"
}

func TestV1Beta1Conversion(t *testing.T) {
	doc := sprintf(betaPool, "a", 50) + "---\n" + betaClass
	cfg, err := LoadData("beta.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	np := cfg.NodePool("a")
	if !np.Spec.Template.Spec.ExpireAfter.Never {
		t.Errorf("expireAfter: want Never, got %v", np.Spec.Template.Spec.ExpireAfter)
	}
	if np.Spec.Disruption.ConsolidationPolicy != ConsolidationPolicyWhenEmptyOrUnderutilized {
		t.Errorf("policy %q", np.Spec.Disruption.ConsolidationPolicy)
	}
	if got := *np.Spec.Template.Spec.NodeClassRef; got != (NodeClassReference{Group: AWSGroup, Kind: EC2NodeClassKind, Name: "default"}) {
		t.Errorf("nodeClassRef %+v", got)
	}
	if len(np.Spec.Disruption.Budgets) != 1 || np.Spec.Disruption.Budgets[0].Nodes != "10%" {
		t.Errorf("budgets %+v", np.Spec.Disruption.Budgets)
	}
	nc := cfg.NodeClass("default")
	if nc.AMIAlias() != "bottlerocket@latest" || nc.AMIFamily() != AMIFamilyBottlerocket {
		t.Errorf("alias %q family %q", nc.AMIAlias(), nc.AMIFamily())
	}
	if nc.Spec.Kubelet == nil || *nc.Spec.Kubelet.MaxPods != 50 {
		t.Errorf("kubelet not moved to the class: %+v", nc.Spec.Kubelet)
	}
	var msgs []string
	for _, w := range cfg.Warnings {
		msgs = append(msgs, w.String())
	}
	want := []string{
		`beta.yaml:1: apiVersion: karpenter.sh/v1beta1 is deprecated; converted to karpenter.sh/v1`,
		`beta.yaml:19: spec.disruption.consolidationPolicy: WhenUnderutilized is WhenEmptyOrUnderutilized in karpenter.sh/v1`,
		`beta.yaml:20: spec.disruption.expireAfter: moved to spec.template.spec.expireAfter in karpenter.sh/v1`,
		`beta.yaml:22: apiVersion: karpenter.k8s.aws/v1beta1 is deprecated; converted to karpenter.k8s.aws/v1`,
		`beta.yaml:27: spec.amiFamily: amiFamily Bottlerocket without amiSelectorTerms is amiSelectorTerms [{alias: bottlerocket@latest}] in karpenter.k8s.aws/v1`,
		`beta.yaml:12: spec.template.spec.kubelet: moved to EC2NodeClass "default" spec.kubelet (karpenter.sh/v1 keeps kubelet settings on the EC2NodeClass)`,
	}
	if strings.Join(msgs, "\n") != strings.Join(want, "\n") {
		t.Errorf("warnings:\ngot:\n%s\nwant:\n%s", strings.Join(msgs, "\n"), strings.Join(want, "\n"))
	}

	// Two v1beta1 pools with different kubelets cannot share one v1 class.
	doc = sprintf(betaPool, "a", 50) + "---\n" + sprintf(betaPool, "b", 60) + "---\n" + betaClass
	_, err = LoadData("beta.yaml", []byte(doc))
	if err == nil || err.Error() != `beta.yaml:33: spec.template.spec.kubelet: differs from the kubelet settings of NodePool "a"; karpenter.sh/v1 keeps kubelet on the EC2NodeClass, so give this NodePool its own EC2NodeClass` {
		t.Errorf("kubelet conflict: got %v", err)
	}
}

func TestV1Beta1Errors(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"ubuntu without terms", edit(betaClass, "Bottlerocket", "Ubuntu"),
			`beta.yaml:6: spec.amiFamily: Ubuntu has no karpenter.k8s.aws/v1 alias: set amiSelectorTerms for your Ubuntu AMIs (it then converts to amiFamily AL2)`},
		{"custom without terms", edit(betaClass, "Bottlerocket", "Custom"),
			`beta.yaml:5: spec.amiSelectorTerms: amiSelectorTerms is required when amiFamily == 'Custom'`},
		{"alias is v1 only", edit(betaClass, "  amiFamily: Bottlerocket\n", "  amiFamily: AL2\n  amiSelectorTerms:\n    - alias: al2@latest\n"),
			`beta.yaml:8: spec.amiSelectorTerms[0].alias: unknown field`},
		{"WhenEmpty needs consolidateAfter", edit(sprintf(betaPool, "a", 5), "WhenUnderutilized", "WhenEmpty") + "---\n" + betaClass,
			`beta.yaml:18: spec.disruption.consolidateAfter: consolidateAfter must be specified with consolidationPolicy=WhenEmpty`},
		{"expireAfter error points at v1beta1 path", edit(sprintf(betaPool, "a", 5), "expireAfter: Never", "expireAfter: 1w") + "---\n" + betaClass,
			`beta.yaml:20: spec.disruption.expireAfter: "1w" is not a duration (e.g. 30s, 5m, 720h) or "Never"`},
		{"v1 policy in v1beta1", edit(sprintf(betaPool, "a", 5), "WhenUnderutilized", "WhenEmptyOrUnderutilized") + "---\n" + betaClass,
			`beta.yaml:19: spec.disruption.consolidationPolicy: "WhenEmptyOrUnderutilized" is not one of WhenEmpty, WhenUnderutilized`},
		{"v1-only class field", betaClass + "  ipPrefixCount: 2\n",
			`beta.yaml:14: spec.ipPrefixCount: exists only in karpenter.k8s.aws/v1: set apiVersion: karpenter.k8s.aws/v1 to use it`},
		{"kubelet validated in the pool", edit(sprintf(betaPool, "a", 5), "maxPods: 5", "maxPods: -5") + "---\n" + betaClass,
			`beta.yaml:13: spec.template.spec.kubelet.maxPods: -5 must not be negative`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadData("beta.yaml", []byte(tc.doc))
			if err == nil || err.Error() != tc.want {
				t.Errorf("got:\n%v\nwant:\n%s", err, tc.want)
			}
		})
	}
	// Ubuntu with terms converts to AL2 with a warning.
	cfg, err := LoadData("beta.yaml", []byte(edit(betaClass, "  amiFamily: Bottlerocket\n", "  amiFamily: Ubuntu\n  amiSelectorTerms:\n    - name: ubuntu-eks/*\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.NodeClass("default").AMIFamily(); got != AMIFamilyAL2 {
		t.Errorf("Ubuntu converted to %q", got)
	}
}
