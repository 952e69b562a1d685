// Command karpentercompare runs Karpenter's own provisioning scheduler
// (sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling) on the
// same inputs nodewright's solver reads, so the two plans can be compared
// on cost, node count, speed and allocations.
//
// It is a separate Go module so that Karpenter and its controller-runtime
// never enter the product's module graph or build; the root go.mod ignores
// this folder. Its module path lies under the product's internal/ folder so
// that Go's internal-package rule lets it import nodewright's loaders,
// catalog and solver (through a replace of the product module by ../../..).
//
//	karpentercompare plan --config FILE|DIR --workload FILE [--nodes FILE] [--catalog DIR|builtin] [--region R] [-o json|table] [--side-by-side]
//	karpentercompare compare ...   (plan --side-by-side)
//	karpentercompare bench [--scenarios DIR] [--catalog DIR] [--runs N] [--diverse 5000,20000] [-o table|json]
package main
