package scheduling_test

const honorTaintDomains = "nodeTaintsPolicy=Honor drops pods on untolerated nodes from the counts but keeps those nodes' " +
	"(and tainted NodePools') domains, so an empty domain the pod can never use holds the global minimum at 0 (nobody fixing)"

// knownHoles lists the ported behaviours where nodewright is wrong today:
// test name -> the hole. runSpec inverts these cases, so each still fails
// as written and the fix makes the test fail until its entry is deleted.
var knownHoles = map[string]string{
	"InstanceTypeCompatibility/DifferentOSDifferentNodes": "no Windows types: the catalog labels every type kubernetes.io/os=linux " +
		"(Windows os label, being fixed)",
	"InstanceTypeCompatibility/DifferentInstanceTypeSelectors": "beta labels (beta.kubernetes.io/instance-type, -arch, -os, " +
		"failure-domain.beta.kubernetes.io/zone, -region) are not normalized to the stable keys as Karpenter's " +
		"v1.NormalizedLabels does; a pod selecting one is unschedulable (nobody fixing)",
	"Topology/NodeTaintsPolicy/Honor":                           honorTaintDomains,
	"Topology/NodeTaintsPolicy/HonorDiscoveredFromPool":         honorTaintDomains,
	"Topology/NodeTaintsPolicy/HonorExclusivePoolsShareDomains": honorTaintDomains,
	"Topology/NodeAffinityPolicy/Honor": "nodeAffinityPolicy=Honor keeps the domains of existing nodes the pod's node selector " +
		"excludes, so their empty domains hold the global minimum at 0 (nobody fixing)",
	"Provisioning/PodLevelResources": "pod-level resources (spec.resources, Kubernetes 1.34) are not read: the pod counts " +
		"its containers' requests instead (pod-level resources, being fixed)",
}
