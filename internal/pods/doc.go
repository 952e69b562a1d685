// Package pods holds the predicates every controller asks of a pod:
// reschedulable, evictable, empty node, do-not-disrupt, daemon-owned, the
// pod-event clock a node's claim keeps, and Karpenter's eviction and
// disruption costs. The lifecycle, disruption and termination controllers
// (and the static NodePools' scale-down order in internal/state) answer
// these questions the same way, so the answers live here once instead of
// in whichever controller asked first.
//
// It imports only internal/apis and Kubernetes types, so any controller can
// use it without pulling in another controller.
package pods
