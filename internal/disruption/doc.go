// Package disruption is the disruption function's controller: it removes or
// replaces nodes on purpose, with Karpenter's methods in Karpenter's order —
// emptiness, static drift, drift, multi-node consolidation, single-node
// consolidation — followed by a global re-pack check Karpenter lacks.
//
// A pass (one scheduled invocation, or one woken by the disruption queue
// when a consolidateAfter or validation delay runs out before the next
// tick: wakeup.go; under the "disruption" lease) either moves the pending
// command on or decides a new one:
//
//   - Decide builds the candidates (Candidates: initialized, not deleting,
//     not nominated, no do-not-disrupt, no PDB forbidding an eviction now),
//     the budgets (ComputeBudgets) and asks each method in turn; every method
//     simulates with the provisioner's solver over the same cluster view
//     (Simulate). The first command found is saved in the store (KV) with
//     a validation time, instead of sleeping inside the Lambda.
//   - A later pass (after Settings.ValidationDelay) re-validates the command
//     against fresh state (Validate) and acts: deletions get the NodeClaim
//     deletion mark (the termination workflow in internal/termination, run
//     by the lifecycle, drains them); replacements first mark the candidates
//     Disrupting and taint them karpenter.sh/disrupted:NoSchedule, run a
//     provisioning pass (the provisioner's launch path places the
//     candidates' pods on new capacity), and only once those pods fit on
//     initialized nodes (ReadyToDrain) are the candidates marked for
//     deletion. Replacements that never initialize are rolled back.
//
// Churn: a replacement must be strictly cheaper than what it replaces, so
// a node is never replaced by one of the same type and price and every
// action lowers the cost (no cycles); on top of that, nodes that replaced
// type T are not turned back into T within Settings.FlipFlopWindow.
//
// Every action is explained as a node event (Disrupting, DisruptionBlocked,
// Unconsolidatable) and a log line, e.g. "Consolidating: replace 3 nodes
// (m5.xlarge x3, $0.576/h) with 1 m6i.2xlarge ($0.384/h), saves $0.192/h".
//
// Balanced pools (consolidationPolicy: Balanced, balanced.go) consolidate
// underutilized nodes only through moves whose savings are worth their
// disruption, scored as Karpenter v1.14 does.
//
// Static NodePools (spec.replicas) are never consolidated. A drifted static
// node is replaced by a node of its own pool, planned from the pool's
// template rather than from its pods (staticDrift, Karpenter's StaticDrift):
// marking it Disrupting takes it out of the pool's replica count, so the
// provisioning pass launches the replacement; the pool's scale-down and
// limits.nodes come first.
//
// Expiration and terminationGracePeriod are the lifecycle's (expiration is
// not budgeted, as in Karpenter); the grace period bounds every drain this
// package starts because the termination workflow enforces it.
//
// # Safety rules
//
//   - It removes capacity only through the termination drain (taint,
//     PDB-respecting eviction), and only claims of this stack.
//   - It never takes more nodes at once than the NodePools' disruption
//     budgets allow, counting nodes already being disrupted.
//   - A node being replaced is marked for deletion only once its pods fit
//     on initialized nodes (ReadyToDrain); replacements that never
//     initialize are rolled back and nothing is removed.
//   - Nodes with a karpenter.sh/do-not-disrupt pod, or whose pods a PDB
//     forbids evicting now, are not candidates.
package disruption
