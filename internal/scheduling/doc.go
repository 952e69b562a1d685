// Package scheduling is nodewright's pure solver: the requirements algebra,
// pod constraints (requests, tolerations, affinity, topology spread, host
// ports, volume topology) and the bin-packing solver that turns pending pods
// into a plan of NodeClaims. It never calls AWS or Kubernetes; inputs in,
// plan out.
//
// How the solver works (the why behind the code):
//
// Shapes. Pending pods that the solver cannot tell apart (namespace,
// requests, node selector and affinity, tolerations, topology terms, host
// ports, volume topology, and the labels any selector in the input reads)
// form one shape (shape.go writes the key that tells them apart, build.go
// groups the pods). Shapes are placed in bulk: a claim takes as many pods
// of a shape as its resources and topology allow in one step, so ten
// thousand replicas cost about as much as one.
//
// Order. Shapes go largest first (CPU, memory, creation time, UID) like
// Karpenter's first-fit-decreasing, except that shapes whose pods each need
// a node of their own (required hostname anti-affinity against their own
// kind) go first: they fix the node count and everything after them fills
// the room they leave.
//
// Placement. For each shape: (1) a pass over existing and in-flight nodes
// (initialized first) and the claims planned so far, using only room that
// is already paid for (a claim's current cheapest type); (2) if nothing
// fit, grow the claim whose next type step costs least per pod placed; (3)
// otherwise open a claim from the first NodePool (by weight, then name)
// that can take the shape; (4) if none can, relax the next preference in
// Karpenter's order (extra required node affinity term, preferred pod
// affinity, preferred pod anti-affinity, preferred node affinity heaviest
// first, ScheduleAnyway spreads, tolerate PreferNoSchedule) and retry;
// finally report the pods with a reason assembled per NodePool. solver.go
// holds this loop and step (1); claim.go the claims, growth.go step (2),
// relax.go step (4), explain.go the reasons.
//
// Check and commit. Placing on a claim is two steps kept apart: admits
// (claim.go) decides, changing nothing, whether a claim could ever take the
// shape (host ports, room in its largest option, the pool's taints,
// requirements), and both the pass over paid-for room (try) and the growth
// pass (stepOf) ask it; commitClaim then merges the requirements and any
// narrowing, keeps the options that still fit and records the pods, or
// changes nothing when no option would remain.
//
// Caches. Each shape keeps a candidate list of node indices from which
// nodes that can never take it (requirements, taints, host ports,
// resources, decided hostname topology) are dropped as they are found, and
// a per-NodePool bitset of compatible instance types. Claims keep their
// options as a bitset over the pool's types ordered cheapest first, so a
// claim's type is the lowest set bit.
//
// Topology. Groups (spread, affinity, anti-affinity; topogroups.go) are
// deduplicated across shapes and hold per-domain counts updated on every
// placement (topology.go, one check per kind of term); an anti-affinity
// group also counts the domains its owners occupy, so pods it selects keep
// away (symmetry, including existing pods' terms). A claim whose zone (or
// any key) is still open is narrowed to one domain when a pod's topology
// needs it; pods placed before that are then counted.
//
// Repack (repack.go). After placement, claims whose pods can all move into
// room other claims already pay for are dropped, and claims that can shed
// pods into such room until a cheaper type fits are downsized; moves keep
// every constraint. Nothing here raises the plan's cost.
//
// Re-split. Filling grows a claim until everything fits and then buys the
// cheapest type that holds it; with prices close to linear in size that
// ends in one big node with room idle, where two right-sized nodes, or
// nodes of different families for CPU-heavy and memory-heavy pods, cost
// less. The re-split pass (resplit.go, resplit_pack.go, resplit_apply.go)
// takes windows of interchangeable claims (same NodePool and requirements:
// the whole set when small, else the emptiest, then each alone), moves the
// pods free of per-node topology (the others stay, pinned, and lend their
// room), tries every non-dominated type in three pod orders and a
// CPU/memory split, right-sizes each node, and keeps a window's new packing
// only if it is cheaper at the price CreateFleet would launch it at (spot:
// the mean of the cheapest five options).
//
// Lower bound. Every plan carries the cost of the cheapest cover of its new
// pods' resources by the types they may use (lowerbound.go): classes by
// hard constraints and fitting types, the cover LP (lp.go), subset LPs, a
// coupled LP where classes use different types (lowerbound_coupled.go), and
// whole nodes by branch and bound for small plans (intcover.go). Each is a
// valid bound, so cost over bound says how much any solver could still
// save.
//
// Resolution (plan.go). Each claim launches, as CreateFleet would, in the
// preferred capacity type it allows and some option offers (reserved, spot,
// on-demand), at the cheapest available offering; its options are the
// fitting types with that capacity type, cheapest first, at most 60. A
// reserved offering takes at most its ReservationCapacity claims of the
// plan; later claims resolve to the next capacity type their pool allows.
// The offering, not the type, decides zone, zone ID, capacity type and the
// three capacity-reservation labels (launchFilter in pools.go), so
// requirements on any of them select offerings.
package scheduling
