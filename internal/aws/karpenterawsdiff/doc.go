// Package karpenterawsdiff checks nodewright's launch requests against
// Karpenter-AWS's own request builders, so that what nodewright asks EC2
// for answers to code that runs on thousands of real accounts rather than
// to the project's own simulator (issue 32).
//
// It is a separate Go module, so that Karpenter-AWS (pinned at v1.14.1)
// and its controller-runtime never enter the product's module graph; the
// root go.mod ignores this folder. Its path lies under the product's
// internal/ folder, so it may import nodewright's internal packages
// (through a replace of the product module by ../../..).
//
// # What runs
//
// The corpus is every EC2NodeClass of infra/examples (each example folder
// loaded as one configuration, v1beta1 classes converted by nodewright's
// loader, since Karpenter v1.14 reads v1 only) and of Karpenter's own
// examples/v1, read from the pinned module in the module cache. Each class
// launches a spot, an on-demand and three reserved claims (into an ODCR, a
// capacity block and an interruptible ODCR), each in five shapes: one and
// four instance types by one and four subnets (two of them in one zone) in
// an IPv4 cluster, and four by four in an IPv6 cluster.
// A claim carries its NodePool's labels and taints.
//
// Karpenter's side is its launch path wired as its operator wires it: the
// instance type provider (its resolver and offerings, with nodewright's
// catalog prices), the AMI provider (its SSM paths and image queries), the
// capacity reservation provider, the launch template provider and the
// instance provider, over its own pkg/fake EC2 API, which records every
// CreateLaunchTemplateInput and CreateFleetInput. The class is defaulted
// with the CRD's schema, as the API server does, and its status is filled
// as the EC2NodeClass controller fills it. Nodewright's side is its
// aws.Provider over an EC2, SSM and EKS API answering from the same world
// (world.go): the same subnets, security groups, images per SSM parameter,
// reservations and cluster; Karpenter's status takes nodewright's
// subnets, security groups and instance profile, so both launch into the
// same ones.
//
// # What is compared
//
// Flatten turns each side's requests into field paths and values: tag
// specifications by resource type and tag key, block devices by device
// name, interfaces by card and index, overrides by instance type and
// subnet, security groups as sets, user data decoded (MIME parts by
// content type, nodeadm NodeConfig by field with the kubelet's flags,
// labels and taints split, Bottlerocket TOML by setting, scripts by their
// lines and their bootstrap call's arguments). Templates are named by
// their image and the instance types of their overrides, priorities become
// ranks, and generated names, ids and tokens are dropped, as are
// nodewright's bookkeeping tags (nodewright.io/...) and the claim's own
// tags (karpenter.sh/nodeclaim, and Name when it is the claim's name),
// which Karpenter puts on the instance only after the launch, with
// CreateTags (its Name then the Node's name; nodewright tags at launch
// only, since its claims are records no controller tags instances from).
//
// Every field the two send differently must be listed, with the reason,
// in DIFFERENCES.md, and every row there must still occur: the test fails
// otherwise. Fix nodewright before adding a row.
//
//	cd internal/aws/karpenterawsdiff && go test ./...     (make karpenter-aws-diff)
//	KARPENTER_AWS_DIFF_REPORT=FILE go test ./...          (every unlisted difference into FILE)
package karpenterawsdiff
