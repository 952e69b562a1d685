// Package simulation turns offline inputs (NodePool and EC2NodeClass YAML, a
// workload's manifests, optional existing nodes, a catalog) into the
// solver's input, and a plan into the documented output of
// `nodewright simulate`. It is shared by the CLI, the plan-quality
// benchmarks and the Karpenter side-by-side module, so that all three read
// the same inputs the same way and print the same JSON. Static NodePools
// (spec.replicas) open no node for pods, as in the running provisioner.
package simulation
