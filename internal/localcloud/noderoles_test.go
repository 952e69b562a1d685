package localcloud_test

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
)

// givenRole is the existing role the example configuration
// (infra/testdata/config, which the local cloud synthesizes) names in its
// EC2NodeClass existing-role.
const givenRole = "existing-karpenter-node-role"

// The synthesized stack lets the controllers pass exactly the node roles
// its EC2NodeClasses name. Through the real launch path with the
// controller role's credentials: a class naming the given role launches
// (with the instance profile the stack creates for it), and a class naming
// a role no class of the configuration names is refused: iam:PassRole on
// that role is denied.
func TestLaunchPassesOnlyTheNodeRolesGiven(t *testing.T) {
	ic := newIAMCloud(t)
	denied := ic.c.ExpectDenials(func(d awssim.Denial) bool { return d.Action == "iam:PassRole" })
	const notGiven = "KarpenterNodeRole-not-given"
	account := ic.c.AWS.Options().AccountID
	// The profile exists in the account (someone made it), but its role is
	// not one the stack was given.
	ic.c.AWS.AddInstanceProfile(fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", account, nwaws.InstanceProfileName("iam", notGiven)),
		fmt.Sprintf("arn:aws:iam::%s:role/%s", account, notGiven))

	p, it := ic.controllerProvider(t)
	launch := func(claim, role string) (nwaws.Instance, error) {
		return p.Launch(ic.ctx, nwaws.LaunchRequest{NodeClaim: roleClaim(claim, role), NodeClass: roleNodeClass(role), InstanceTypes: []*catalog.InstanceType{it}})
	}

	inst, err := launch("given-role-claim", givenRole)
	if err != nil || inst.ID == "" {
		t.Fatalf("launch with the role the configuration gives: %+v, %v (denials %v)", inst, err, ic.c.AWS.Denials())
	}
	if n := denied(); n != 0 {
		t.Fatalf("%d PassRole denials launching with the given role: %v", n, ic.c.AWS.Denials())
	}

	if inst, err := launch("other-role-claim", notGiven); err == nil {
		t.Fatalf("launch with a role the configuration does not give succeeded: %+v", inst)
	}
	var last awssim.Denial
	for _, d := range ic.c.AWS.Denials() {
		if d.Action == "iam:PassRole" {
			last = d
		}
	}
	if !strings.HasSuffix(last.Resource, ":role/"+notGiven) || !strings.Contains(last.Principal, "nodewright-controller") {
		t.Errorf("PassRole denial = %+v, want the controller refused passing %s (all: %v)", last, notGiven, ic.c.AWS.Denials())
	}
	if errors.Is(err, nwaws.ErrInsufficientCapacity) {
		t.Errorf("a refused PassRole reads as a capacity error: %v", err)
	}
}

// controllerProvider is the launch path with the controller role's
// credentials, and the m5.large its tests launch. User data needs the
// cluster's endpoint and CA; this local cloud runs no API server (no node
// is meant to join).
func (ic *iamCloud) controllerProvider(t *testing.T) (*nwaws.Provider, *catalog.InstanceType) {
	t.Helper()
	ic.c.AWS.SetEKSCluster("https://127.0.0.1:6443", []byte("-----BEGIN CERTIFICATE-----\nMIIBnodewright\n-----END CERTIFICATE-----\n"), ic.c.AWS.Options().KubernetesVersion)
	cfg := ic.as(ic.stack.Controller)
	p, err := nwaws.New(nwaws.Options{ClusterName: "iam", Region: ic.c.Region, Owner: ic.c.TableARN(ic.table), Logger: slog.New(slog.DiscardHandler)}, nwaws.Clients{
		EC2: ec2.NewFromConfig(cfg), SSM: ssm.NewFromConfig(cfg), EKS: eks.NewFromConfig(cfg),
		Pricing: pricing.NewFromConfig(cfg, func(o *pricing.Options) { o.Region = nwaws.PricingRegion(cfg.Region) }),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := p.Catalog(ic.ctx, nil)
	if err != nil {
		t.Fatalf("the controller reads the catalog: %v", err)
	}
	it, ok := cat.Get("m5.large")
	if !ok {
		t.Fatal("catalog has no m5.large")
	}
	return p, it
}

// roleNodeClass is an EC2NodeClass of the local cloud's cluster "iam"
// whose nodes run with role.
func roleNodeClass(role string) *apis.EC2NodeClass {
	return &apis.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: role},
		Spec: apis.EC2NodeClassSpec{
			SubnetSelectorTerms:        []apis.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "iam"}}},
			SecurityGroupSelectorTerms: []apis.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "iam"}}},
			AMISelectorTerms:           []apis.AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                       role,
		},
	}
}

func roleClaim(name, class string) *apis.NodeClaim {
	return &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{apis.NodePoolLabelKey: "default"}},
		Spec: apis.NodeClaimSpec{
			Requirements: []apis.NodeSelectorRequirementWithMinValues{{Key: apis.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}}},
			NodeClassRef: &apis.NodeClassReference{Name: class},
		},
	}
}
