package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awslogs"
	"github.com/aws/jsii-runtime-go"
)

// SavedQuery is a CloudWatch Logs Insights query the stack saves (under
// nodewright/<cluster>/ in the console's Saved queries) for a question of
// the README's troubleshooting guide. The placeholder in capitals is
// replaced by the operator before running it.
type SavedQuery struct {
	ID, Name, Query string
}

// SavedQueries returns the stack's saved Logs Insights queries, run over
// every function's log group: the functions log JSON with the IDs one
// searches by (pod as namespace/name, nodeclaim, node, instance-id), and a
// pod's story spans the webhook, the provisioner and later the disruption,
// lifecycle and interruption functions.
func SavedQueries() []SavedQuery {
	return []SavedQuery{
		{ID: "QueryPendingPod", Name: "why-is-this-pod-pending", Query: `# Replace NAMESPACE/POD. The webhook's nudge, the provisioner's verdict
# ("pods unschedulable" with its reason, or "pods nominated" with the
# nodeclaim or node), then run why-was-this-node-removed with that nodeclaim
# to see its launch and registration.
fields @timestamp, function, level, msg, reason, target, nodeclaim, nodepool, error
| filter @message like "NAMESPACE/POD"
| sort @timestamp asc
| limit 200`},
		{ID: "QueryNodeRemoved", Name: "why-was-this-node-removed", Query: `# Replace NODECLAIM_OR_NODE (a nodeclaim name, node name or instance ID).
# Launch, registration, the disruption decision (method, reason, message),
# expiry, emptiness or interruption, drain and termination, in order.
fields @timestamp, function, level, msg, reason, method, action, message, nodeclaim, node, ` + "`instance-id`" + `, error
| filter @message like "NODECLAIM_OR_NODE"
| sort @timestamp asc
| limit 500`},
		{ID: "QueryErrors", Name: "errors-and-warnings", Query: `# Every function's errors and warnings, newest first.
fields @timestamp, function, level, msg, error, nodeclaim, node, pod
| filter level in ["ERROR", "WARN"]
| sort @timestamp desc
| limit 200`},
	}
}

// savedQueries saves SavedQueries over every function's log group.
func (b *builder) savedQueries() {
	groups := make([]interface{}, 0, len(Functions))
	for _, fn := range Functions {
		groups = append(groups, b.logGroups[fn].LogGroupName())
	}
	for _, q := range SavedQueries() {
		awslogs.NewCfnQueryDefinition(b.scope, jsii.String(q.ID), &awslogs.CfnQueryDefinitionProps{
			Name:          jsii.String("nodewright/" + b.cfg.ClusterName + "/" + q.Name),
			QueryString:   jsii.String(q.Query),
			LogGroupNames: &groups,
		})
	}
}
