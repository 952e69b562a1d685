package scheduling

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Taints a node carries only until it is initialized; the solver ignores
// them on uninitialized nodes and in-flight claims because they will be
// gone by the time the pod binds.
var ephemeralTaintKeys = map[string]bool{
	corev1.TaintNodeNotReady:                         true,
	corev1.TaintNodeUnreachable:                      true,
	"node.cloudprovider.kubernetes.io/uninitialized": true,
	"karpenter.sh/unregistered":                      true,
}

// IsEphemeralTaint reports whether t is one of the taints that disappear as
// a node comes up.
func IsEphemeralTaint(t corev1.Taint) bool { return ephemeralTaintKeys[t.Key] }

// ToleratesTaint reports whether any toleration tolerates t (Kubernetes
// semantics: empty key with Exists tolerates everything, empty effect
// matches all effects).
func ToleratesTaint(tolerations []corev1.Toleration, t *corev1.Taint) bool {
	for i := range tolerations {
		if tolerates(&tolerations[i], t) {
			return true
		}
	}
	return false
}

func tolerates(tol *corev1.Toleration, t *corev1.Taint) bool {
	if tol.Effect != "" && tol.Effect != t.Effect {
		return false
	}
	if tol.Key != "" && tol.Key != t.Key {
		return false
	}
	switch tol.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return tol.Key != "" && tol.Value == t.Value
	}
	return false
}

// untoleratedTaint returns the first NoSchedule/NoExecute taint the
// tolerations do not cover. PreferNoSchedule taints block only when
// strictPrefer is set: the solver first honours them like Karpenter does
// and relaxes that as the last preference.
func untoleratedTaint(tolerations []corev1.Toleration, taints []corev1.Taint, strictPrefer bool) *corev1.Taint {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule && !strictPrefer {
			continue
		}
		if !ToleratesTaint(tolerations, t) {
			return t
		}
	}
	return nil
}

func taintString(t *corev1.Taint) string {
	if t.Value == "" {
		return fmt.Sprintf("%s:%s", t.Key, t.Effect)
	}
	return fmt.Sprintf("%s=%s:%s", t.Key, t.Value, t.Effect)
}
