// Package apis holds nodewright's configuration and record types. They are
// Karpenter's own API (karpenter.sh/v1 NodePool, karpenter.k8s.aws/v1
// EC2NodeClass, karpenter.sh/v1 NodeClaim) so users' YAML moves over
// unchanged; JSON tags match Karpenter's field names exactly.
//
// Load reads the user's files strictly (unknown fields are errors), converts
// karpenter.sh/v1beta1 and karpenter.k8s.aws/v1beta1 documents to v1 with a
// deprecation warning, applies Karpenter's v1 defaults (SetDefaults) and
// validates every object as Karpenter's CRDs would (Validate), reporting
// each problem as "file:line: field.path: message" in an ErrorList.
//
// NodePool.Hash and EC2NodeClass.Hash are the spec hashes a NodeClaim records
// at launch (NodeClaim.NodePoolHash, NodeClaim.NodeClassHash) so drift can be
// detected later; Budget.IsActive and Disruption.AllowedDisruptions evaluate
// disruption budgets (cron schedules in UTC, see package cron).
// NodePool.Static tells a static pool (spec.replicas) from a dynamic one.
package apis
