package scheduling_test

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// windowsConfig is Karpenter's examples/v1/windows-2022.yaml (a NodePool
// requiring kubernetes.io/os In [windows] on a windows2022@latest class)
// without its arch requirement, beside a Linux pool with no os requirement.
// windowsWeight orders the pools (the Linux pool weighs 5; Karpenter tries
// heavier pools first).
// Without requireOS the Windows pool leaves the os to its class.
func windowsConfig(t *testing.T, windowsWeight int, requireOS bool) *apis.Config {
	t.Helper()
	osReq := ""
	if requireOS {
		osReq = `        - {key: kubernetes.io/os, operator: In, values: ["windows"]}
`
	}
	doc := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: windows2022}
spec:
  weight: ` + strconv.Itoa(windowsWeight) + `
  template:
    spec:
      requirements:
` + osReq + `        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: ["c", "m", "r"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: windows2022}
---
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: linux}
spec:
  weight: 5
  template:
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: al2023}
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: windows2022}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: windows2022@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: al2023}
spec:
  role: NodeRole
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: test}}]
`
	cfg, err := apis.LoadData("windows.yaml", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// windowsInput is the solver input of windowsConfig on the embedded catalog.
func windowsInput(t *testing.T, windowsWeight int, requireOS bool, ps []*corev1.Pod) *scheduling.Input {
	t.Helper()
	cat, err := catalog.Builtin("us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	in := &scheduling.Input{Pods: ps}
	if err := scheduling.InputFromConfig(windowsConfig(t, windowsWeight, requireOS), cat, in); err != nil {
		t.Fatal(err)
	}
	return in
}

// poolTypes are the types of in's pool with an offering whose labels (and
// the type's) meet the pool's requirements.
func poolTypes(in *scheduling.Input, pool string) []*scheduling.InstanceType {
	var out []*scheduling.InstanceType
	for _, p := range in.NodePools {
		if p.Name != pool {
			continue
		}
		for _, it := range in.InstanceTypes[pool] {
			if slices.ContainsFunc(it.Offerings, func(o scheduling.Offering) bool {
				l := maps.Clone(it.Labels)
				l[scheduling.LabelZone], l[scheduling.LabelCapacityType] = o.Zone, o.CapacityType
				return p.Requirements.MatchesLabels(l)
			}) {
				out = append(out, it)
			}
		}
	}
	return out
}

// A NodePool requiring kubernetes.io/os In [windows] on a Windows class has
// types, each labelled windows with its class's build, and amd64 only:
// Karpenter's instancetype computeRequirements takes the os from the AMI
// family (getOS) and the windows-build from amifamily.Windows.Build.
func TestWindowsPoolHasWindowsTypes(t *testing.T) {
	in := windowsInput(t, 10, true, nil)
	win := poolTypes(in, "windows2022")
	if len(win) == 0 {
		t.Fatalf("the windows2022 pool has no instance type (%d offered)", len(in.InstanceTypes["windows2022"]))
	}
	for _, it := range in.InstanceTypes["windows2022"] {
		l := it.Labels
		if l[scheduling.LabelOS] != "windows" || l[scheduling.LabelWindowsBuild] != "10.0.20348" || l[scheduling.LabelArch] != "amd64" {
			t.Fatalf("%s on a Windows2022 class: os %q build %q arch %q", it.Name, l[scheduling.LabelOS], l[scheduling.LabelWindowsBuild], l[scheduling.LabelArch])
		}
	}
	linux := in.InstanceTypes["linux"]
	arm := 0
	for _, it := range linux {
		if _, ok := it.Labels[scheduling.LabelWindowsBuild]; ok || it.Labels[scheduling.LabelOS] != "linux" {
			t.Fatalf("%s on an AL2023 class: labels %v", it.Name, it.Labels)
		}
		if it.Labels[scheduling.LabelArch] == "arm64" {
			arm++
		}
	}
	if arm == 0 || len(in.InstanceTypes["windows2022"]) >= len(linux) {
		t.Errorf("AL2023 offers %d types (%d arm64), Windows %d: Windows must leave out exactly the non-amd64 types", len(linux), arm, len(in.InstanceTypes["windows2022"]))
	}
}

// A Windows pod (nodeSelector kubernetes.io/os: windows) is planned onto the
// Windows pool, on a claim labelled windows with its build, even when the
// Linux pool is tried first.
func TestWindowsPodPlannedOntoWindowsPool(t *testing.T) {
	sel := map[string]string{corev1.LabelOSStable: "windows"}
	in := windowsInput(t, 1, true, pods(3, podOpts{name: "win", cpu: "1", mem: "2Gi", nodeSelector: sel}))
	plan := mustSolve(t, in)
	if len(plan.Unschedulable) != 0 || len(plan.NodeClaims) == 0 {
		t.Fatalf("windows pods: %v unschedulable %v", summary(plan), plan.Unschedulable)
	}
	for _, c := range plan.NodeClaims {
		if c.NodePool != "windows2022" || c.Labels[scheduling.LabelOS] != "windows" || c.Labels[scheduling.LabelWindowsBuild] != "10.0.20348" {
			t.Errorf("claim %s in pool %s labels %v", c.InstanceType, c.NodePool, c.Labels)
		}
	}
}

// A pod requiring Linux is never planned onto the Windows pool, however
// heavy it is and whether or not the pool itself requires windows (the
// class alone makes its nodes Windows); a pod without an os requirement
// may be, as in Karpenter (pods get no implicit os requirement: only the
// NodePool's requirements and taints keep them off, which is why Windows
// pools are usually tainted).
func TestLinuxPodNotPlannedOntoWindowsPool(t *testing.T) {
	for _, requireOS := range []bool{true, false} {
		t.Run("requireOS="+strconv.FormatBool(requireOS), func(t *testing.T) {
			sel := map[string]string{corev1.LabelOSStable: "linux"}
			ps := append(pods(3, podOpts{name: "lin", cpu: "1", mem: "2Gi", nodeSelector: sel}),
				pods(1, podOpts{name: "any", cpu: "1", mem: "2Gi"})...)
			plan := mustSolve(t, windowsInput(t, 10, requireOS, ps))
			if len(plan.Unschedulable) != 0 {
				t.Fatalf("unschedulable %v", plan.Unschedulable)
			}
			anyOnWindows := false
			for _, c := range plan.NodeClaims {
				for _, p := range c.PodRefs {
					if strings.HasPrefix(p.Name, "lin") && c.NodePool != "linux" {
						t.Errorf("linux pod %s planned onto pool %s (%s, labels %v)", p.Name, c.NodePool, c.InstanceType, c.Labels)
					}
					if strings.HasPrefix(p.Name, "any") {
						anyOnWindows = c.NodePool == "windows2022"
					}
				}
				if want := map[bool]string{true: "windows", false: "linux"}[c.NodePool == "windows2022"]; c.Labels[scheduling.LabelOS] != want {
					t.Errorf("claim %s of pool %s: os label %q, want %q", c.InstanceType, c.NodePool, c.Labels[scheduling.LabelOS], want)
				}
			}
			if !anyOnWindows {
				t.Errorf("a pod without an os requirement goes to the heavier Windows pool in Karpenter; plan %v", summary(plan))
			}
		})
	}
}
