// Package karpenter runs the real Karpenter controller (its KWOK
// provider, sigs.k8s.io/karpenter/kwok at the release go.mod pins) in the
// local cloud's Kubernetes control plane, beside nodewright: the proof
// that neither autoscaler deletes, drains, taints or counts the other's
// nodes, NodeClaims or instances (TestCoexistsWithKarpenter, run by
// `make karpenter-coexist-test`).
//
// It is a module of its own so the product module never depends on
// Karpenter. EnsureBinary builds the controller once into
// $XDG_CACHE_HOME/nodewright/karpenter/<go.sum hash> (with the release's
// CRDs); Start installs the CRDs and runs it as the static-token user
// User, whose requests the API server audit-logs (CloudOptions). Karpenter's
// KWOK provider creates Nodes annotated kwok.x-k8s.io/node=fake with
// kwok:// provider IDs, which the local cloud's KWOK keeps Ready; it calls
// no AWS API.
package karpenter
