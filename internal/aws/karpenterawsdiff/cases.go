package karpenterawsdiff

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"

	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// claimKind is a claim's capacity type and, for a reserved claim, the
// kind of reservation the class selects.
type claimKind struct {
	CapacityType, Reservation string
}

func (k claimKind) String() string {
	if k.Reservation == "" {
		return k.CapacityType
	}
	return k.CapacityType + "(" + k.Reservation + ")"
}

// claimKinds are the claims every class launches: spot, on-demand, and
// reserved into each kind of reservation.
var claimKinds = []claimKind{
	{CapacityType: apis.CapacityTypeSpot},
	{CapacityType: apis.CapacityTypeOnDemand},
	{CapacityType: apis.CapacityTypeReserved, Reservation: ReservationODCR},
	{CapacityType: apis.CapacityTypeReserved, Reservation: ReservationCapacityBlock},
	{CapacityType: apis.CapacityTypeReserved, Reservation: ReservationInterruptible},
}

// Case is one launch both providers make: a class, a claim, and a shape.
type Case struct {
	Class Class
	Claim claimKind
	Shape shape
}

// Name identifies the case in reports.
func (c Case) Name() string { return c.Class.Name + " " + c.Claim.String() + " " + c.Shape.Name }

// Cases are every class with every capacity type in every shape.
func Cases(classes []Class) []Case {
	var out []Case
	for _, c := range classes {
		for _, k := range claimKinds {
			for _, s := range shapes {
				out = append(out, Case{Class: c, Claim: k, Shape: s})
			}
		}
	}
	return out
}

// ShapeCount is how many shapes each class and claim launches in.
func ShapeCount() int { return len(shapes) }

// ClaimCount is how many claims each class launches in each shape.
func ClaimCount() int { return len(claimKinds) }

// Result is what each provider asked EC2 for, or why it did not launch.
type Result struct {
	Karpenter, Nodewright       Requests
	KarpenterErr, NodewrightErr error
}

// Run launches the case with Karpenter's providers and with nodewright's.
// Its error is about the harness (the world, discovery); a provider that
// refuses the launch says so in the Result.
func Run(ctx context.Context, c Case) (Result, error) {
	w, err := newWorld(c.Shape, kubernetesVersion(c.Class.NW.AMIFamily()), c.Claim.Reservation)
	if err != nil {
		return Result{}, err
	}
	nc, kc := c.Class.NW.DeepCopy(), c.Class.K.DeepCopy()
	if c.Claim.CapacityType == apis.CapacityTypeReserved {
		// A reserved claim needs a class that selects the reservations.
		for _, t := range c.Shape.Types {
			nc.Spec.CapacityReservationSelectorTerms = append(nc.Spec.CapacityReservationSelectorTerms, apis.CapacityReservationSelectorTerm{ID: reservationID(t)})
			kc.Spec.CapacityReservationSelectorTerms = append(kc.Spec.CapacityReservationSelectorTerms, v1.CapacityReservationSelectorTerm{ID: reservationID(t)})
		}
	}
	d, err := discover(ctx, w, nc)
	if err != nil {
		return Result{}, fmt.Errorf("nodewright discovery: %w", err)
	}
	var r Result
	spec := claimOf(c)
	kctx, cancel := context.WithCancel(karpenterContext(ctx))
	defer cancel()
	k := newKarpenter(kctx, w)
	if r.KarpenterErr = k.reconcileStatus(kctx, kc, d); r.KarpenterErr == nil {
		r.Karpenter, r.KarpenterErr = k.launch(kctx, kc, spec.karpenter())
	}
	r.Nodewright, r.NodewrightErr = nodewrightLaunch(ctx, w, nc, spec.nodewright(), c.Shape.Types)
	return r, nil
}

// ClaimName is the name of the case's NodeClaim on both sides.
func (c Case) ClaimName() string { return claimOf(c).name }

// claim is what both providers' NodeClaims say: the pool's labels and
// taints, the capacity type and the shape's instance types.
type claim struct {
	name, pool, nodeClass string
	labels                map[string]string
	taints, startup       []corev1.Taint
	capacityType          string
	types                 []string
}

func claimOf(c Case) claim {
	cl := claim{name: "default-x7k2p", pool: "default", nodeClass: c.Class.NW.Name, labels: map[string]string{},
		capacityType: c.Claim.CapacityType, types: c.Shape.Types}
	if np := c.Class.Pool; np != nil {
		cl.name, cl.pool = np.Name+"-x7k2p", np.Name
		maps.Copy(cl.labels, np.Spec.Template.ObjectMeta.Labels)
		cl.taints, cl.startup = np.Spec.Template.Spec.Taints, np.Spec.Template.Spec.StartupTaints
	}
	cl.labels[apis.NodePoolLabelKey] = cl.pool
	return cl
}

func (cl claim) nodewright() *apis.NodeClaim {
	return &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: cl.name, Labels: maps.Clone(cl.labels)},
		Spec: apis.NodeClaimSpec{
			Requirements: []apis.NodeSelectorRequirementWithMinValues{
				{Key: apis.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{cl.capacityType}},
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: cl.types},
			},
			Taints: cl.taints, StartupTaints: cl.startup,
			NodeClassRef: &apis.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: cl.nodeClass},
		},
	}
}

func (cl claim) karpenter() *karpv1.NodeClaim {
	return &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: cl.name, Labels: maps.Clone(cl.labels)},
		Spec: karpv1.NodeClaimSpec{
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{
				{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{cl.capacityType}},
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: cl.types},
			},
			Taints: cl.taints, StartupTaints: cl.startup,
			NodeClassRef: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: cl.nodeClass},
		},
	}
}
