package termination

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/metrics"
)

// Events and metrics are best effort: a failed event is logged at debug and
// never holds the workflow.

func (t *Terminator) event(ctx context.Context, n *corev1.Node, typ, reason, format string, args ...any) {
	if err := t.d.Cluster.NodeEvent(ctx, n, typ, reason, format, args...); err != nil {
		t.d.Log.DebugContext(ctx, "node event", "node", n.Name, "reason", reason, "error", err)
	}
}

func (t *Terminator) podEvent(ctx context.Context, p *corev1.Pod, typ, reason, format string, args ...any) {
	if err := t.d.Cluster.PodEvent(ctx, p, typ, reason, format, args...); err != nil {
		t.d.Log.DebugContext(ctx, "pod event", "pod", p.Namespace+"/"+p.Name, "reason", reason, "error", err)
	}
}

func (t *Terminator) metric(name string, dims metrics.Dimensions) {
	if t.d.Metrics != nil {
		t.d.Metrics.Add(name, 1, dims)
	}
}
