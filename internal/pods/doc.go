// Package pods holds the predicates every controller asks of a pod:
// reschedulable, evictable, empty node, do-not-disrupt, daemon-owned, and
// the pod-event clock a node's claim keeps. The lifecycle, disruption and
// termination controllers answer these questions the same way, so the
// answers live here once instead of in whichever controller asked first.
//
// It imports only internal/apis and Kubernetes types, so any controller can
// use it without pulling in another controller.
package pods
