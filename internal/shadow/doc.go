// Package shadow is nodewright's shadow mode (settings.ModeShadow): the
// adapters internal/app wires instead of the acting ones, so every function
// runs its normal pass on the real cluster and AWS data and nothing acts.
//
//   - Cluster is the Kubernetes client with every write replaced: no
//     Events, taints, Node patches or deletes, evictions or Pod deletes.
//   - Cloud is the EC2 provider with every write replaced: Launch answers
//     with the offering CreateFleet would most likely pick and launches
//     nothing; Terminate and launch template deletion do nothing.
//   - Claims keeps the NodeClaims a pass creates in memory for that pass
//     only, so no record makes the lifecycle wait for a node that never
//     comes.
//   - Recorder collects one provisioning pass's would-launch plan and
//     writes it to the table (internal/decision), the one write shadow mode
//     makes.
//   - Fleet is the disruption function's shadow pass: disruption's own
//     decision over every node, including those nodewright did not launch
//     (Karpenter's, Cluster Autoscaler's, managed node groups'), recorded
//     and never executed. Nodes nodewright does not own are only ever
//     looked at here: the acting path's ownership checks are untouched.
//
// The stack grants shadow mode read rights only (IAM and Kubernetes), so
// a write this package missed would be refused, not made.
package shadow

import "errors"

// ErrShadow is returned by every write shadow mode refuses to make.
var ErrShadow = errors.New("shadow mode: no changes are made")
