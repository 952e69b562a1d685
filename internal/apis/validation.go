package apis

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodewright/nodewright/internal/apis/cron"
)

// This file mirrors the OpenAPI and CEL rules of Karpenter's v1 CRDs
// (karpenter.sh NodePool, karpenter.k8s.aws EC2NodeClass); where Karpenter
// has a message, it is used verbatim so users can search for it.

const msgRequired = "required field is missing"

type validator struct{ errs []fieldErr }

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, fieldErr{path: path, msg: fmt.Sprintf(format, args...)})
}

func (v *validator) oneOf(path, value string, allowed ...string) {
	if !slices.Contains(allowed, value) {
		v.add(path, "%q is not one of %s", value, strings.Join(allowed, ", "))
	}
}

func toErrorList(errs []fieldErr) error {
	if len(errs) == 0 {
		return nil
	}
	out := make(ErrorList, len(errs))
	for i, e := range errs {
		out[i] = FieldError{Path: e.path, Message: e.msg}
	}
	return out
}

// Validate checks the (defaulted) NodePool on its own: everything except
// whether its nodeClassRef resolves, which needs the loaded classes. The
// error is an ErrorList without file names.
func (np *NodePool) Validate() error { return toErrorList(validateNodePool(np)) }

// Validate checks the (defaulted) EC2NodeClass. The error is an ErrorList
// without file names.
func (nc *EC2NodeClass) Validate() error { return toErrorList(validateEC2NodeClass(nc)) }

var operators = []string{
	string(corev1.NodeSelectorOpIn), string(corev1.NodeSelectorOpNotIn),
	string(corev1.NodeSelectorOpExists), string(corev1.NodeSelectorOpDoesNotExist),
	string(corev1.NodeSelectorOpGt), string(corev1.NodeSelectorOpLt),
	string(NodeSelectorOpGte), string(NodeSelectorOpLte),
}

func validateNodePool(np *NodePool) []fieldErr {
	v := &validator{}
	validateName(v, np.Name)
	s := np.Spec
	if s.Weight != nil && (*s.Weight < 1 || *s.Weight > 100) {
		v.add("spec.weight", "%d is outside 1..100", *s.Weight)
	}
	for name, q := range s.Limits {
		p := joinKey("spec.limits", string(name))
		if name == "" {
			v.add(p, "empty resource name")
		}
		if q.Sign() < 0 {
			v.add(p, "%s must not be negative", q.String())
		}
	}
	validateTemplateLabels(v, "spec.template.metadata.labels", s.Template.ObjectMeta.Labels)
	for k := range s.Template.ObjectMeta.Annotations {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			v.add(joinKey("spec.template.metadata.annotations", k), "invalid annotation key: %s", strings.Join(errs, "; "))
		}
	}
	validateClaimSpec(v, "spec.template.spec", &s.Template.Spec)
	validateDisruption(v, "spec.disruption", &s.Disruption)
	validateReplicas(v, &s)
	return v.errs
}

// validateReplicas applies Karpenter's rules for spec.replicas.
func validateReplicas(v *validator, s *NodePoolSpec) {
	if s.Replicas == nil {
		return
	}
	if *s.Replicas < 0 {
		v.add("spec.replicas", "%d must not be negative", *s.Replicas)
	}
	for name := range s.Limits {
		if name != "nodes" {
			v.add("spec.limits", "only 'limits.nodes' is supported on static NodePools")
			break
		}
	}
	if s.Weight != nil {
		v.add("spec.weight", "'weight' is not supported on static NodePools")
	}
}

func validateName(v *validator, name string) {
	if name == "" {
		v.add("metadata.name", msgRequired)
		return
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		v.add("metadata.name", "%q is not a valid name: %s", name, strings.Join(errs, "; "))
	}
}

func validateClaimSpec(v *validator, path string, ts *NodeClaimTemplateSpec) {
	if len(ts.Requirements) > 100 {
		v.add(joinField(path, "requirements"), "%d requirements, at most 100 are allowed", len(ts.Requirements))
	}
	for i, r := range ts.Requirements {
		validateRequirement(v, joinIndex(joinField(path, "requirements"), i), r)
	}
	validateTaints(v, joinField(path, "taints"), ts.Taints)
	validateTaints(v, joinField(path, "startupTaints"), ts.StartupTaints)
	ref := ts.NodeClassRef
	refPath := joinField(path, "nodeClassRef")
	switch ref {
	case nil:
		v.add(refPath, msgRequired)
	default:
		if ref.Name == "" {
			v.add(joinField(refPath, "name"), "name may not be empty")
		}
		if ref.Group == "" {
			v.add(joinField(refPath, "group"), "group may not be empty")
		} else if strings.Contains(ref.Group, "/") {
			v.add(joinField(refPath, "group"), "%q is a group, not an apiVersion: use %q", ref.Group, AWSGroup)
		} else if ref.Group != AWSGroup {
			v.add(joinField(refPath, "group"), "%q is not supported: nodewright node classes are %s/%s", ref.Group, AWSGroup, EC2NodeClassKind)
		}
		if ref.Kind == "" {
			v.add(joinField(refPath, "kind"), "kind may not be empty")
		} else if ref.Kind != EC2NodeClassKind {
			v.add(joinField(refPath, "kind"), "%q is not supported: nodewright node classes are %s/%s", ref.Kind, AWSGroup, EC2NodeClassKind)
		}
	}
	validateNillable(v, joinField(path, "expireAfter"), ts.ExpireAfter)
	if d := ts.TerminationGracePeriod; d != nil {
		validateSeconds(v, joinField(path, "terminationGracePeriod"), d.Duration)
	}
}

// validateNillable applies the pattern ^(([0-9]+(s|m|h))+|Never)$ to a value.
func validateNillable(v *validator, path string, n NillableDuration) {
	if d, ok := n.Get(); ok {
		validateSeconds(v, path, d)
	}
}

// validateSeconds applies ^([0-9]+(s|m|h))+$: non-negative whole seconds.
func validateSeconds(v *validator, path string, d time.Duration) {
	if d < 0 {
		v.add(path, "%s must not be negative", d)
	} else if d%time.Second != 0 {
		v.add(path, "%s must be whole seconds (e.g. 30s, 5m, 1h)", d)
	}
}

func validateRequirement(v *validator, path string, r NodeSelectorRequirementWithMinValues) {
	if r.Key == "" {
		v.add(joinField(path, "key"), msgRequired)
	} else {
		for _, m := range labelKeyProblems(r.Key) {
			v.add(joinField(path, "key"), "%s", m)
		}
	}
	if m := wellKnownValueProblem(r); m != "" {
		v.add(joinField(path, "values"), "%s", m)
	}
	if r.Operator == "" {
		v.add(joinField(path, "operator"), msgRequired)
	} else {
		v.oneOf(joinField(path, "operator"), string(r.Operator), operators...)
	}
	for j, val := range r.Values {
		if errs := validation.IsValidLabelValue(val); len(errs) > 0 {
			v.add(joinIndex(joinField(path, "values"), j), "%q is not a valid label value: %s", val, strings.Join(errs, "; "))
		}
	}
	switch r.Operator {
	case corev1.NodeSelectorOpIn:
		if len(r.Values) == 0 {
			v.add(joinField(path, "values"), "requirements with operator 'In' must have a value defined")
		}
	case corev1.NodeSelectorOpGt, corev1.NodeSelectorOpLt, NodeSelectorOpGte, NodeSelectorOpLte:
		ok := len(r.Values) == 1
		if ok {
			n, err := strconv.ParseInt(r.Values[0], 10, 64)
			ok = err == nil && n >= 0
		}
		if !ok {
			v.add(joinField(path, "values"), "operator %s takes exactly one non-negative integer value, got %s", r.Operator, quoteList(r.Values))
		}
	case corev1.NodeSelectorOpExists, corev1.NodeSelectorOpDoesNotExist:
		if len(r.Values) > 0 {
			v.add(joinField(path, "values"), "operator %s takes no values, got %s", r.Operator, quoteList(r.Values))
		}
	}
	if r.MinValues != nil {
		mv := *r.MinValues
		switch {
		case mv < 1 || mv > 50:
			v.add(joinField(path, "minValues"), "%d is outside 1..50", mv)
		case r.Operator == corev1.NodeSelectorOpIn && mv > len(r.Values):
			v.add(joinField(path, "minValues"), "requirements with 'minValues' must have at least that many values specified in the 'values' field (minValues %d, %d values)", mv, len(r.Values))
		}
	}
}

func quoteList(vals []string) string {
	q := make([]string, len(vals))
	for i, s := range vals {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func validateTemplateLabels(v *validator, path string, labels map[string]string) {
	if len(labels) > 100 {
		v.add(path, "%d labels, at most 100 are allowed", len(labels))
	}
	for _, k := range sortedKeys(labels) {
		p := joinKey(path, k)
		for _, m := range labelKeyProblems(k) {
			v.add(p, "%s", m)
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			v.add(p, "%q is not a valid label value: %s", labels[k], strings.Join(errs, "; "))
		}
	}
}

var taintEffects = []string{string(corev1.TaintEffectNoSchedule), string(corev1.TaintEffectPreferNoSchedule), string(corev1.TaintEffectNoExecute)}

func validateTaints(v *validator, path string, taints []corev1.Taint) {
	seen := map[string]int{}
	for i, t := range taints {
		p := joinIndex(path, i)
		if t.Key == "" {
			v.add(joinField(p, "key"), msgRequired)
		} else if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			v.add(joinField(p, "key"), "%q is not a valid taint key: %s", t.Key, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
			v.add(joinField(p, "value"), "%q is not a valid taint value: %s", t.Value, strings.Join(errs, "; "))
		}
		if t.Effect == "" {
			v.add(joinField(p, "effect"), msgRequired)
		} else {
			v.oneOf(joinField(p, "effect"), string(t.Effect), taintEffects...)
		}
		id := t.Key + ":" + string(t.Effect)
		if j, dup := seen[id]; dup {
			v.add(p, "taint %s:%s repeats %s[%d]", t.Key, t.Effect, path, j)
		} else {
			seen[id] = i
		}
	}
}

var (
	budgetSchedulePattern = regexp.MustCompile(`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`)
	disruptionReasons     = []string{string(DisruptionReasonUnderutilized), string(DisruptionReasonEmpty), string(DisruptionReasonDrifted)}
)

func validateDisruption(v *validator, path string, d *Disruption) {
	if d.ConsolidateAfter.IsZero() {
		v.add(joinField(path, "consolidateAfter"), "%s (a duration such as 0s, 30s, 5m, or Never)", msgRequired)
	}
	validateNillable(v, joinField(path, "consolidateAfter"), d.ConsolidateAfter)
	if d.ConsolidationPolicy == consolidationPolicyWhenUnderutilizedBeta {
		v.add(joinField(path, "consolidationPolicy"), "%q is karpenter.sh/v1beta1; use %s", d.ConsolidationPolicy, ConsolidationPolicyWhenEmptyOrUnderutilized)
	} else if d.ConsolidationPolicy != "" {
		v.oneOf(joinField(path, "consolidationPolicy"), string(d.ConsolidationPolicy), string(ConsolidationPolicyWhenEmpty),
			string(ConsolidationPolicyWhenEmptyOrUnderutilized), string(ConsolidationPolicyBalanced))
	}
	bp := joinField(path, "budgets")
	if len(d.Budgets) > 50 {
		v.add(bp, "%d budgets, at most 50 are allowed", len(d.Budgets))
	}
	for i, b := range d.Budgets {
		p := joinIndex(bp, i)
		if !budgetNodesPattern.MatchString(b.Nodes) {
			v.add(joinField(p, "nodes"), "%q is not a node count or percentage (e.g. \"5\" or \"10%%\"; must match %s)", b.Nodes, budgetNodesPattern)
		}
		if b.Schedule != nil {
			sp := joinField(p, "schedule")
			if !budgetSchedulePattern.MatchString(*b.Schedule) {
				v.add(sp, "%q is not a cron schedule (5 fields: minute hour day-of-month month day-of-week, or @daily, @hourly, @weekly, @monthly, @yearly, @annually, @midnight)", *b.Schedule)
			} else if _, err := cron.Parse(*b.Schedule); err != nil {
				v.add(sp, "%q is not a valid cron schedule: %v", *b.Schedule, err)
			}
		}
		if b.Duration != nil {
			if d := b.Duration.Duration; d < 0 || d%time.Minute != 0 {
				v.add(joinField(p, "duration"), "%s must be whole minutes or hours (e.g. 30m, 8h, 1h30m)", d)
			}
		}
		if (b.Schedule == nil) != (b.Duration == nil) {
			v.add(p, "'schedule' must be set with 'duration'")
		}
		for j, r := range b.Reasons {
			v.oneOf(joinIndex(joinField(p, "reasons"), j), string(r), disruptionReasons...)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

// knownValues are the only values some well-known labels ever take on
// nodewright's nodes. Karpenter accepts other values, but a NodePool that
// requires one can never launch a node, so the loader warns about it.
var knownValues = map[string][]string{
	CapacityTypeLabelKey:   {CapacityTypeSpot, CapacityTypeOnDemand, CapacityTypeReserved},
	corev1.LabelArchStable: {"amd64", "arm64"},
	corev1.LabelOSStable:   {"linux", "windows"},
	// The provider's WellKnownValuesForRequirements (pkg/apis/v1/labels.go init).
	"karpenter.k8s.aws/instance-tenancy": {"dedicated", "default"},
}

// lintNodePool returns warnings for requirements that can never be met.
func lintNodePool(np *NodePool) []fieldErr {
	var out []fieldErr
	for i, r := range np.Spec.Template.Spec.Requirements {
		allowed, ok := knownValues[r.Key]
		if !ok || r.Operator != corev1.NodeSelectorOpIn || wellKnownValueProblem(r) != "" {
			continue // an error already says so
		}
		for j, val := range r.Values {
			if !slices.Contains(allowed, val) {
				out = append(out, fieldErr{
					path: fmt.Sprintf("spec.template.spec.requirements[%d].values[%d]", i, j),
					msg:  fmt.Sprintf("%q never matches: %s is one of %s", val, r.Key, strings.Join(allowed, ", ")),
				})
			}
		}
	}
	return out
}
