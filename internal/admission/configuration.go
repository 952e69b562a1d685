package admission

import (
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const (
	// WebhookTimeoutSeconds: the webhook is only a hint that makes
	// provisioning faster than the 1-minute schedule; it must never slow
	// down or block the scheduler.
	WebhookTimeoutSeconds = 2

	// UnschedulableCondition selects the scheduler's status update that
	// marks a pod Unschedulable, so the API server calls the webhook for
	// nothing else. The has() guards keep the expression total: an error in
	// a match condition would otherwise be subject to failurePolicy (Ignore,
	// but still a call).
	UnschedulableCondition = `has(object.status) && has(object.status.conditions) && ` +
		`object.status.conditions.exists(c, c.type == 'PodScheduled' && c.status == 'False' && ` +
		`has(c.reason) && c.reason == 'Unschedulable')`
	// NotBoundCondition skips pods already bound to a node.
	NotBoundCondition = `!has(object.spec.nodeName) || object.spec.nodeName == ''`
)

// WebhookConfiguration is the ValidatingWebhookConfiguration that sends the
// scheduler's Unschedulable pod status updates to the webhook at url
// (caBundle nil for a publicly trusted certificate). The CDK stack's
// registrar installs it in a real cluster and the demo in the local one, so
// both register the same hook.
func WebhookConfiguration(name string, labels map[string]string, url string, caBundle []byte) *admissionv1.ValidatingWebhookConfiguration {
	failurePolicy := admissionv1.Ignore
	sideEffects := admissionv1.SideEffectClassNoneOnDryRun
	matchPolicy := admissionv1.Equivalent
	scope := admissionv1.NamespacedScope
	timeout := int32(WebhookTimeoutSeconds)
	return &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Webhooks: []admissionv1.ValidatingWebhook{{
			// A webhook name must be a fully qualified domain-like name.
			Name:                    "pending-pods.nodewright.io",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			AdmissionReviewVersions: []string{"v1"},
			SideEffects:             &sideEffects,
			FailurePolicy:           &failurePolicy,
			MatchPolicy:             &matchPolicy,
			TimeoutSeconds:          &timeout,
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Update},
				Rule: admissionv1.Rule{
					APIGroups:   []string{""},
					APIVersions: []string{"v1"},
					Resources:   []string{"pods/status"},
					Scope:       &scope,
				},
			}},
			MatchConditions: []admissionv1.MatchCondition{
				{Name: "unschedulable", Expression: UnschedulableCondition},
				{Name: "not-bound", Expression: NotBoundCondition},
			},
		}},
	}
}
