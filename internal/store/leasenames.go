package store

// EmptinessLease is the lease two controllers share: the lifecycle deletes
// empty nodes under it and the disruption controller holds it while marking
// its candidates, so no two invocations both spend the last unit of a
// pool's disruption budget. (Leases one controller alone takes are named
// next to it, e.g. provisioning.LeaseName.)
const EmptinessLease = "lifecycle-emptiness"
