package scheduling

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Well-known label keys the solver reasons about. They mirror the keys the
// catalog puts on nodes; duplicated here so the algebra has no dependency on
// how the catalog is built.
const (
	LabelHostname       = "kubernetes.io/hostname"
	LabelInstanceType   = "node.kubernetes.io/instance-type"
	LabelArch           = "kubernetes.io/arch"
	LabelOS             = "kubernetes.io/os"
	LabelZone           = "topology.kubernetes.io/zone"
	LabelRegion         = "topology.kubernetes.io/region"
	LabelZoneID         = "topology.k8s.aws/zone-id"
	LabelCapacityType   = "karpenter.sh/capacity-type"
	LabelNodePool       = "karpenter.sh/nodepool"
	LabelNodeClass      = "karpenter.k8s.aws/ec2nodeclass"
	LabelWindowsBuild   = "node.kubernetes.io/windows-build"
	awsInstanceLabelPfx = "karpenter.k8s.aws/instance-"

	CapacityTypeSpot     = "spot"
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeReserved = "reserved"
)

// IsWellKnownLabel reports whether a pod may require key without any NodePool
// defining it: every launched node carries (or knowingly lacks) these labels.
func IsWellKnownLabel(key string) bool {
	switch key {
	case LabelInstanceType, LabelArch, LabelOS, LabelZone, LabelRegion, LabelZoneID,
		LabelCapacityType, LabelNodePool, LabelNodeClass, LabelWindowsBuild,
		LabelReservationID, LabelReservationType, LabelReservationInterruptible, LabelPlacementPartition, labelPlacementGroupID:
		return true
	}
	return strings.HasPrefix(key, awsInstanceLabelPfx)
}

// Requirement is the set of values one label key may take. It is a finite
// set or the complement of one, optionally bounded numerically (Gt/Lt), and
// tracks whether a node *without* the label satisfies it (NotIn and
// DoesNotExist do, In/Exists/Gt/Lt do not), which is how Kubernetes node
// selection treats absent labels.
type Requirement struct {
	Key        string
	complement bool
	values     []string // sorted, unique
	hasGt      bool
	gt         int64
	hasLt      bool
	lt         int64
	absentOK   bool
	// MinValues asks that the instance-type options keep at least this many
	// distinct values of Key (0 = no minimum).
	MinValues int
}

// NewRequirement builds a requirement from a Kubernetes operator.
func NewRequirement(key string, op corev1.NodeSelectorOperator, values ...string) (Requirement, error) {
	r := Requirement{Key: NormalizedKey(key)} // normalize.go
	if err := ValidLabel(key, values...); err != nil {
		return r, fmt.Errorf("requirement %s %s: %w", key, op, err)
	}
	switch op {
	case corev1.NodeSelectorOpIn:
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpNotIn:
		r.complement, r.absentOK = true, true
		r.values = sortedUnique(values)
	case corev1.NodeSelectorOpExists:
		r.complement = true
	case corev1.NodeSelectorOpDoesNotExist:
		r.absentOK = true
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt:
		if len(values) != 1 {
			return r, fmt.Errorf("requirement %s %s needs exactly one value, got %d", key, op, len(values))
		}
		n, err := strconv.ParseInt(values[0], 10, 64)
		if err != nil {
			return r, fmt.Errorf("requirement %s %s %q: value is not an integer", key, op, values[0])
		}
		r.complement = true
		if op == corev1.NodeSelectorOpGt {
			r.hasGt, r.gt = true, n
		} else {
			r.hasLt, r.lt = true, n
		}
	default:
		return r, fmt.Errorf("requirement %s: unknown operator %q", key, op)
	}
	return r, nil
}

// MustRequirement is NewRequirement for literals known to be valid.
func MustRequirement(key string, op corev1.NodeSelectorOperator, values ...string) Requirement {
	r, err := NewRequirement(key, op, values...)
	if err != nil {
		panic(err)
	}
	return r
}

func sortedUnique(values []string) []string {
	if len(values) == 0 {
		return nil
	}
	out := append([]string(nil), values...)
	sort.Strings(out)
	j := 1
	for i := 1; i < len(out); i++ {
		if out[i] != out[j-1] {
			out[j] = out[i]
			j++
		}
	}
	return out[:j]
}

func containsSorted(values []string, v string) bool {
	i := sort.SearchStrings(values, v)
	return i < len(values) && values[i] == v
}

func (r *Requirement) inBounds(v string) bool {
	if !r.hasGt && !r.hasLt {
		return true
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return false
	}
	return (!r.hasGt || n > r.gt) && (!r.hasLt || n < r.lt)
}

// Has reports whether a node whose label Key has value v satisfies r.
func (r *Requirement) Has(v string) bool {
	if r.complement {
		return !containsSorted(r.values, v) && r.inBounds(v)
	}
	return containsSorted(r.values, v)
}

// AllowsAbsent reports whether a node without label Key satisfies r.
func (r *Requirement) AllowsAbsent() bool { return r.absentOK }

// Matches reports whether a node label (value, present) satisfies r.
func (r *Requirement) Matches(v string, present bool) bool {
	if !present {
		return r.absentOK
	}
	return r.Has(v)
}

// Len is the number of values r admits (huge for complements).
func (r *Requirement) Len() int {
	if r.complement {
		if r.hasGt && r.hasLt {
			n := r.lt - r.gt - 1
			if n <= 0 {
				return 0
			}
			for _, v := range r.values {
				if r.inBounds(v) {
					n--
				}
			}
			if n > math.MaxInt32 {
				return math.MaxInt32
			}
			return int(n)
		}
		return math.MaxInt64 - len(r.values)
	}
	return len(r.values)
}

// Satisfiable reports whether some node (with or without the label) meets r.
func (r *Requirement) Satisfiable() bool { return r.absentOK || r.Len() > 0 }

// Values returns the admitted values of a finite requirement (nil for complements).
func (r *Requirement) Values() []string {
	if r.complement {
		return nil
	}
	return r.values
}

// Finite reports whether r lists its values (In, or intersections that became finite).
func (r *Requirement) Finite() bool { return !r.complement }

// Single returns the only admitted value when r is finite with exactly one value.
func (r *Requirement) Single() (string, bool) {
	if !r.complement && len(r.values) == 1 {
		return r.values[0], true
	}
	return "", false
}

// Operator returns the closest Kubernetes operator describing r.
func (r *Requirement) Operator() corev1.NodeSelectorOperator {
	if r.complement {
		switch {
		case len(r.values) > 0:
			return corev1.NodeSelectorOpNotIn
		case r.hasGt:
			return corev1.NodeSelectorOpGt
		case r.hasLt:
			return corev1.NodeSelectorOpLt
		}
		return corev1.NodeSelectorOpExists
	}
	if len(r.values) > 0 {
		return corev1.NodeSelectorOpIn
	}
	return corev1.NodeSelectorOpDoesNotExist
}

// Intersection returns the values admitted by both r and o.
func (r *Requirement) Intersection(o *Requirement) Requirement {
	out := Requirement{Key: r.Key, absentOK: r.absentOK && o.absentOK, MinValues: max(r.MinValues, o.MinValues)}
	out.hasGt, out.gt = r.hasGt, r.gt
	if o.hasGt && (!out.hasGt || o.gt > out.gt) {
		out.hasGt, out.gt = true, o.gt
	}
	out.hasLt, out.lt = r.hasLt, r.lt
	if o.hasLt && (!out.hasLt || o.lt < out.lt) {
		out.hasLt, out.lt = true, o.lt
	}
	switch {
	case r.complement && o.complement:
		out.complement = true
		out.values = unionSorted(r.values, o.values)
		return out
	case r.complement:
		out.values = filterSorted(o.values, func(v string) bool { return r.Has(v) && out.inBounds(v) })
	case o.complement:
		out.values = filterSorted(r.values, func(v string) bool { return o.Has(v) && out.inBounds(v) })
	default:
		out.values = filterSorted(r.values, func(v string) bool { return containsSorted(o.values, v) && out.inBounds(v) })
	}
	out.hasGt, out.hasLt = false, false // a finite set already applied its bounds
	return out
}

func unionSorted(a, b []string) []string {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]string, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j >= len(b) || (i < len(a) && a[i] < b[j]):
			out = append(out, a[i])
			i++
		case i >= len(a) || b[j] < a[i]:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

func filterSorted(values []string, keep func(string) bool) []string {
	all := true
	for _, v := range values {
		if !keep(v) {
			all = false
			break
		}
	}
	if all {
		return values // shared, never mutated
	}
	var out []string
	for _, v := range values {
		if keep(v) {
			out = append(out, v)
		}
	}
	return out
}

// Equal reports whether r and o admit the same values (MinValues included).
func (r *Requirement) Equal(o *Requirement) bool {
	if r.Key != o.Key || r.complement != o.complement || r.absentOK != o.absentOK || r.MinValues != o.MinValues ||
		r.hasGt != o.hasGt || r.hasLt != o.hasLt || (r.hasGt && r.gt != o.gt) || (r.hasLt && r.lt != o.lt) ||
		len(r.values) != len(o.values) {
		return false
	}
	for i := range r.values {
		if r.values[i] != o.values[i] {
			return false
		}
	}
	return true
}

// String renders r for people: "arch in [arm64]", "team not in [a]", "gpu exists".
func (r *Requirement) String() string {
	return shortKey(r.Key) + " " + r.describe()
}

func (r *Requirement) describe() string {
	switch r.Operator() {
	case corev1.NodeSelectorOpIn:
		return "in [" + strings.Join(r.values, ",") + "]"
	case corev1.NodeSelectorOpNotIn:
		s := "not in [" + strings.Join(r.values, ",") + "]"
		if r.hasGt {
			s += fmt.Sprintf(" and > %d", r.gt)
		}
		if r.hasLt {
			s += fmt.Sprintf(" and < %d", r.lt)
		}
		return s
	case corev1.NodeSelectorOpGt:
		if r.hasLt {
			return fmt.Sprintf("> %d and < %d", r.gt, r.lt)
		}
		return fmt.Sprintf("> %d", r.gt)
	case corev1.NodeSelectorOpLt:
		return fmt.Sprintf("< %d", r.lt)
	case corev1.NodeSelectorOpExists:
		return "exists"
	}
	return "does not exist"
}

// shortKey drops the domain prefix of a label key for messages (instance-family, arch).
func shortKey(key string) string {
	if i := strings.LastIndexByte(key, '/'); i >= 0 {
		return key[i+1:]
	}
	return key
}

// NodeSelectorRequirement renders r as a Kubernetes requirement. Complements
// with numeric bounds become Gt (or Lt) when they carry no excluded values.
func (r *Requirement) NodeSelectorRequirement() corev1.NodeSelectorRequirement {
	op := r.Operator()
	out := corev1.NodeSelectorRequirement{Key: r.Key, Operator: op}
	switch op {
	case corev1.NodeSelectorOpIn, corev1.NodeSelectorOpNotIn:
		out.Values = append([]string(nil), r.values...)
	case corev1.NodeSelectorOpGt:
		out.Values = []string{strconv.FormatInt(r.gt, 10)}
	case corev1.NodeSelectorOpLt:
		out.Values = []string{strconv.FormatInt(r.lt, 10)}
	}
	return out
}

// Requirements is a conjunction of per-key requirements, sorted by key. It
// is a value type: operations return new Requirements and never mutate
// their inputs, so requirement sets can be shared between pods and claims.
type Requirements []Requirement

// NewRequirements builds a conjunction, intersecting repeated keys.
func NewRequirements(reqs ...Requirement) Requirements {
	var out Requirements
	for i := range reqs {
		out = out.Add(reqs[i])
	}
	return out
}

// ValidLabel reports whether key and values could be a node label: a
// requirement's single In value becomes a label of the node launched for it
// and is joined into the kubelet's --node-labels, where a value like
// "a,dedicated=pci" would add a label of the pod's choosing and an invalid
// one would make a node that never joins. The API server does not validate
// the values of preferred node affinity terms, so the solver must (as
// Karpenter's provisioner does).
func ValidLabel(key string, values ...string) error {
	if errs := validation.IsQualifiedName(key); len(errs) > 0 {
		return fmt.Errorf("invalid label key %q: %s", key, strings.Join(errs, "; "))
	}
	for _, v := range values {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("invalid value %q for label %s: %s", v, key, strings.Join(errs, "; "))
		}
	}
	return nil
}

// RequirementsFromSelector converts node selector requirements (one term).
func RequirementsFromSelector(terms []corev1.NodeSelectorRequirement) (Requirements, error) {
	var out Requirements
	for _, t := range terms {
		r, err := NewRequirement(t.Key, t.Operator, t.Values...)
		if err != nil {
			return nil, err
		}
		out = out.Add(r)
	}
	return out, nil
}

// RequirementsFromLabels makes one single-valued In requirement per label.
func RequirementsFromLabels(labels map[string]string) Requirements {
	out := make(Requirements, 0, len(labels))
	for k, v := range labels {
		out = append(out, Requirement{Key: k, values: []string{v}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

func (rs Requirements) index(key string) int {
	for i := range rs {
		if rs[i].Key == key {
			return i
		}
		if rs[i].Key > key {
			return -1
		}
	}
	return -1
}

// Get returns the requirement on key, if any.
func (rs Requirements) Get(key string) (*Requirement, bool) {
	if i := rs.index(key); i >= 0 {
		return &rs[i], true
	}
	return nil, false
}

// Has reports whether rs constrains key.
func (rs Requirements) Has(key string) bool { return rs.index(key) >= 0 }

// Add returns rs with r intersected in.
func (rs Requirements) Add(r Requirement) Requirements {
	out := make(Requirements, 0, len(rs)+1)
	added := false
	for i := range rs {
		switch {
		case rs[i].Key == r.Key:
			out = append(out, rs[i].Intersection(&r))
			added = true
		case !added && rs[i].Key > r.Key:
			out = append(out, r)
			out = append(out, rs[i])
			added = true
		default:
			out = append(out, rs[i])
		}
	}
	if !added {
		out = append(out, r)
	}
	return out
}

// Intersect returns the conjunction of rs and o.
func (rs Requirements) Intersect(o Requirements) Requirements {
	if len(o) == 0 {
		return rs
	}
	if len(rs) == 0 {
		return o
	}
	out := make(Requirements, 0, len(rs)+len(o))
	i, j := 0, 0
	for i < len(rs) || j < len(o) {
		switch {
		case j >= len(o) || (i < len(rs) && rs[i].Key < o[j].Key):
			out = append(out, rs[i])
			i++
		case i >= len(rs) || o[j].Key < rs[i].Key:
			out = append(out, o[j])
			j++
		default:
			out = append(out, rs[i].Intersection(&o[j]))
			i++
			j++
		}
	}
	return out
}

// Equal reports whether both conjunctions are identical.
func (rs Requirements) Equal(o Requirements) bool {
	if len(rs) != len(o) {
		return false
	}
	for i := range rs {
		if !rs[i].Equal(&o[i]) {
			return false
		}
	}
	return true
}

// Satisfiable reports whether every key admits something.
func (rs Requirements) Satisfiable() (bool, string) {
	for i := range rs {
		if !rs[i].Satisfiable() {
			return false, rs[i].Key
		}
	}
	return true, ""
}

// MatchesLabels reports whether a node with these labels meets every requirement.
func (rs Requirements) MatchesLabels(labels map[string]string) bool {
	for i := range rs {
		v, ok := labels[rs[i].Key]
		if !rs[i].Matches(v, ok) {
			return false
		}
	}
	return true
}

// Incompatibility explains why two conjunctions cannot hold together.
type Incompatibility struct {
	Key       string
	Undefined bool // incoming requires a custom label the node side never defines
	Node      *Requirement
	Incoming  *Requirement
}

func (e *Incompatibility) Error() string {
	if e.Undefined {
		return fmt.Sprintf("label %q is not defined by the NodePool (pod requires %s)", e.Key, e.Incoming.describe())
	}
	return fmt.Sprintf("%s: node side requires %s but pod requires %s", shortKey(e.Key), e.Node.describe(), e.Incoming.describe())
}

// Compatible checks incoming (a pod's requirements) against rs (a NodePool
// or claim). Keys both constrain must intersect (or both admit absence).
// A custom key only incoming constrains is refused unless incoming admits
// the label being absent (NotIn, DoesNotExist); well-known keys may be
// undefined on the node side because instance types and offerings decide
// them.
func (rs Requirements) Compatible(incoming Requirements) *Incompatibility {
	i := 0
	for j := range incoming {
		in := &incoming[j]
		for i < len(rs) && rs[i].Key < in.Key {
			i++
		}
		if i < len(rs) && rs[i].Key == in.Key {
			if !intersects(&rs[i], in) {
				return &Incompatibility{Key: in.Key, Node: &rs[i], Incoming: in}
			}
			continue
		}
		if in.absentOK || IsWellKnownLabel(in.Key) {
			continue
		}
		return &Incompatibility{Key: in.Key, Undefined: true, Incoming: in}
	}
	return nil
}

func intersects(a, b *Requirement) bool {
	if a.absentOK && b.absentOK {
		return true
	}
	x := a.Intersection(b)
	return x.Len() > 0
}

// String renders the conjunction for messages.
func (rs Requirements) String() string {
	parts := make([]string, len(rs))
	for i := range rs {
		parts[i] = rs[i].String()
	}
	return strings.Join(parts, ", ")
}

// NodeSelectorRequirements renders rs for a NodeClaim spec.
func (rs Requirements) NodeSelectorRequirements() []corev1.NodeSelectorRequirement {
	out := make([]corev1.NodeSelectorRequirement, len(rs))
	for i := range rs {
		out[i] = rs[i].NodeSelectorRequirement()
	}
	return out
}
