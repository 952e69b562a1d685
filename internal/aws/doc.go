// Package aws is nodewright's EC2 launch path: it discovers the subnets,
// security groups, AMIs and cluster facts an EC2NodeClass selects, renders
// user data (package userdata), keeps one launch template per distinct launch
// configuration, launches NodeClaims with CreateFleet (instant, one instance)
// while honouring and filling the shared unavailable-offerings (ICE) set,
// terminates only this cluster's instances, and keeps instance types and
// prices fresh from the EC2 and Pricing APIs.
//
// Every AWS call goes through the unmodified aws-sdk-go-v2 clients, so the
// standard endpoint overrides (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_EC2, ...)
// point the package at the local simulator.
//
// # Instance profile convention
//
// An EC2NodeClass names either spec.instanceProfile (used as is) or
// spec.role. For a role, nodewright does not create instance profiles at run
// time (the functions hold no IAM write permissions); the CDK app creates one
// per role named by InstanceProfileName(cluster, role):
// "nodewright-<cluster>-<role name>", where <role name> is the part of the
// role (or role ARN) after the last "/". Names longer than IAM's 128-character
// limit keep the first 119 characters and append "-" and 8 hex characters of
// the SHA-256 of the full name.
//
// # Tags
//
// Instances, volumes and network interfaces carry
// kubernetes.io/cluster/<cluster>=owned, eks:eks-cluster-name=<cluster>,
// karpenter.sh/nodepool, karpenter.sh/nodeclaim, karpenter.k8s.aws/ec2nodeclass,
// Name=<nodeclaim> and the EC2NodeClass's spec.tags. Launch templates carry
// the cluster tag and karpenter.k8s.aws/cluster=<cluster>. Terminate refuses any
// instance without the cluster tag.
package aws
