package apis

import (
	"errors"
	"strings"
	"testing"
)

const testFile = "nodepools/default.yaml"

// pool is a valid NodePool; cases edit it with strings.Replace so the line
// numbers in expectations can be read off this listing (line 1 = apiVersion).
const pool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels:
        team: platform
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot"]
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64"]
        - key: karpenter.k8s.aws/instance-generation
          operator: Gt
          values: ["5"]
      taints:
        - key: dedicated
          value: gpu
          effect: NoSchedule
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  limits:
    cpu: "1000"
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: 30s
    budgets:
      - nodes: "10%"
      - nodes: "0"
        schedule: "0 9 * * mon-fri"
        duration: 8h
  weight: 10
`

// class is a valid EC2NodeClass (line 1 = apiVersion).
const class = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiSelectorTerms:
    - alias: al2023@latest
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: demo
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs:
        volumeSize: 100Gi
        volumeType: gp3
  kubelet:
    maxPods: 110
`

func edit(doc string, pairs ...string) string {
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(doc, pairs[i]) {
			panic("edit: " + pairs[i] + " not in document")
		}
		doc = strings.Replace(doc, pairs[i], pairs[i+1], 1)
	}
	return doc
}

func TestValidBaseDocuments(t *testing.T) {
	cfg, err := LoadData(testFile, []byte(pool+"---\n"+class))
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Warnings) != 0 {
		t.Errorf("warnings: %v", cfg.Warnings)
	}
	if len(cfg.NodePools) != 1 || len(cfg.NodeClasses) != 1 {
		t.Fatalf("loaded %d pools, %d classes", len(cfg.NodePools), len(cfg.NodeClasses))
	}
}

func TestLoadErrors(t *testing.T) {
	withClass := func(p string) string { return p + "---\n" + class }
	// Class-side cases put the class first: its lines are as listed above.
	classFirst := func(c string) string { return c + "---\n" + pool }
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"operator not in enum", withClass(edit(pool, "operator: Gt", "operator: Ge")),
			[]string{`nodepools/default.yaml:19: spec.template.spec.requirements[2].operator: "Ge" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte`}},
		{"unknown field with suggestion", withClass(edit(pool, "      taints:", "      taint:")),
			[]string{`nodepools/default.yaml:21: spec.template.spec.taint: unknown field (did you mean "taints"?)`}},
		{"unknown top-level spec field", withClass(edit(pool, "  weight: 10", "  weight: 10\n  priority: 3")),
			[]string{`nodepools/default.yaml:40: spec.priority: unknown field`}},
		{"static pool with weight and cpu limit", withClass(edit(pool, "  weight: 10", "  weight: 10\n  replicas: 3")),
			[]string{
				`nodepools/default.yaml:29: spec.limits: only 'limits.nodes' is supported on static NodePools`,
				`nodepools/default.yaml:39: spec.weight: 'weight' is not supported on static NodePools`,
			}},
		{"static pool negative", withClass(edit(pool, "  weight: 10", "  replicas: -1", "    cpu: \"1000\"", "    nodes: \"5\"")),
			[]string{`nodepools/default.yaml:39: spec.replicas: -1 must not be negative`}},
		{"v1beta1 field in v1", withClass(edit(pool, "      taints:", "      kubelet:\n        maxPods: 20\n      taints:")),
			[]string{`nodepools/default.yaml:21: spec.template.spec.kubelet: unknown field: karpenter.sh/v1 keeps kubelet settings on the EC2NodeClass: move them to its spec.kubelet`}},
		{"expireAfter under disruption in v1", withClass(edit(pool, "    consolidateAfter: 30s\n", "    consolidateAfter: 30s\n    expireAfter: 720h\n")),
			[]string{`nodepools/default.yaml:34: spec.disruption.expireAfter: unknown field: moved to spec.template.spec.expireAfter in karpenter.sh/v1`}},
		{"ssmParameter", classFirst(edit(class, "    - alias: al2023@latest\n", "    - ssmParameter: /my/ami\n")),
			[]string{
				`nodepools/default.yaml:5: spec.amiFamily: must specify amiFamily if amiSelectorTerms does not contain an alias`,
			}},
		{"Gt takes one integer", withClass(edit(pool, `values: ["5"]`, `values: ["5", "6"]`)),
			[]string{`nodepools/default.yaml:20: spec.template.spec.requirements[2].values: operator Gt takes exactly one non-negative integer value, got ["5", "6"]`}},
		{"Lt negative", withClass(edit(pool, "operator: Gt\n          values: [\"5\"]", "operator: Lt\n          values: [\"-1\"]")),
			[]string{
				`nodepools/default.yaml:20: spec.template.spec.requirements[2].values[0]: "-1" is not a valid label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
				`nodepools/default.yaml:20: spec.template.spec.requirements[2].values: operator Lt takes exactly one non-negative integer value, got ["-1"]`,
			}},
		{"In needs values", withClass(edit(pool, `values: ["amd64"]`, `values: []`)),
			[]string{`nodepools/default.yaml:17: spec.template.spec.requirements[1].values: requirements with operator 'In' must have a value defined`}},
		{"Exists takes no values", withClass(edit(pool, "operator: In\n          values: [\"amd64\"]", "operator: Exists\n          values: [\"amd64\"]")),
			[]string{`nodepools/default.yaml:17: spec.template.spec.requirements[1].values: operator Exists takes no values, got ["amd64"]`}},
		{"minValues above values", withClass(edit(pool, `values: ["amd64"]`, `values: ["amd64", "arm64"]`+"\n          minValues: 3")),
			[]string{`nodepools/default.yaml:18: spec.template.spec.requirements[1].minValues: requirements with 'minValues' must have at least that many values specified in the 'values' field (minValues 3, 2 values)`}},
		{"minValues range", withClass(edit(pool, `values: ["amd64"]`, `values: ["amd64"]`+"\n          minValues: 0")),
			[]string{`nodepools/default.yaml:18: spec.template.spec.requirements[1].minValues: 0 is outside 1..50`}},
		{"restricted label domain", withClass(edit(pool, "team: platform", "karpenter.sh/team: platform")),
			[]string{`nodepools/default.yaml:9: spec.template.metadata.labels[karpenter.sh/team]: label domain "karpenter.sh" is restricted`}},
		{"nodepool label restricted", withClass(edit(pool, "team: platform", "karpenter.sh/nodepool: other")),
			[]string{`nodepools/default.yaml:9: spec.template.metadata.labels[karpenter.sh/nodepool]: label "karpenter.sh/nodepool" is restricted`}},
		// Karpenter v1.14.1 restricts no kubernetes.io or k8s.io key but the
		// hostname (labelrules_test.go has the full table).
		{"hostname requirement", withClass(edit(pool, "key: kubernetes.io/arch", "key: kubernetes.io/hostname")),
			[]string{`nodepools/default.yaml:15: spec.template.spec.requirements[1].key: label "kubernetes.io/hostname" is restricted`}},
		{"aws domain not well known", withClass(edit(pool, "key: karpenter.k8s.aws/instance-generation", "key: karpenter.k8s.aws/instance-colour")),
			[]string{`nodepools/default.yaml:18: spec.template.spec.requirements[2].key: label domain "karpenter.k8s.aws" is restricted`}},
		{"invalid label value", withClass(edit(pool, "team: platform", "team: platform team")),
			[]string{`nodepools/default.yaml:9: spec.template.metadata.labels[team]: "platform team" is not a valid label value: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`}},
		{"taint effect", withClass(edit(pool, "effect: NoSchedule", "effect: NoScheduled")),
			[]string{`nodepools/default.yaml:24: spec.template.spec.taints[0].effect: "NoScheduled" is not one of NoSchedule, PreferNoSchedule, NoExecute`}},
		{"taint without effect", withClass(edit(pool, "          effect: NoSchedule\n", "")),
			[]string{`nodepools/default.yaml:22: spec.template.spec.taints[0].effect: required field is missing`}},
		{"budget nodes format", withClass(edit(pool, `nodes: "10%"`, `nodes: "10 %"`)),
			[]string{`nodepools/default.yaml:35: spec.disruption.budgets[0].nodes: "10 %" is not a node count or percentage (e.g. "5" or "10%"; must match ^((100|[0-9]{1,2})%|[0-9]+)$)`}},
		{"budget nodes over 100%", withClass(edit(pool, `nodes: "10%"`, `nodes: "101%"`)),
			[]string{`nodepools/default.yaml:35: spec.disruption.budgets[0].nodes: "101%" is not a node count or percentage (e.g. "5" or "10%"; must match ^((100|[0-9]{1,2})%|[0-9]+)$)`}},
		{"budget nodes unquoted integer", withClass(edit(pool, `nodes: "0"`, `nodes: 0`)),
			[]string{`nodepools/default.yaml:36: spec.disruption.budgets[1].nodes: expected a string, got integer 0 (quote it: "0")`}},
		{"schedule without duration", withClass(edit(pool, "        duration: 8h\n", "")),
			[]string{`nodepools/default.yaml:36: spec.disruption.budgets[1]: 'schedule' must be set with 'duration'`}},
		{"duration without schedule", withClass(edit(pool, "        schedule: \"0 9 * * mon-fri\"\n", "")),
			[]string{`nodepools/default.yaml:36: spec.disruption.budgets[1]: 'schedule' must be set with 'duration'`}},
		{"cron out of range", withClass(edit(pool, `"0 9 * * mon-fri"`, `"0 25 * * mon-fri"`)),
			[]string{`nodepools/default.yaml:37: spec.disruption.budgets[1].schedule: "0 25 * * mon-fri" is not a valid cron schedule: hour: 25 is outside 0-23`}},
		{"cron wrong field count", withClass(edit(pool, `"0 9 * * mon-fri"`, `"0 9 * *"`)),
			[]string{`nodepools/default.yaml:37: spec.disruption.budgets[1].schedule: "0 9 * *" is not a cron schedule (5 fields: minute hour day-of-month month day-of-week, or @daily, @hourly, @weekly, @monthly, @yearly, @annually, @midnight)`}},
		{"cron unknown descriptor", withClass(edit(pool, `"0 9 * * mon-fri"`, `"@fortnightly"`)),
			[]string{`nodepools/default.yaml:37: spec.disruption.budgets[1].schedule: "@fortnightly" is not a cron schedule (5 fields: minute hour day-of-month month day-of-week, or @daily, @hourly, @weekly, @monthly, @yearly, @annually, @midnight)`}},
		{"budget duration seconds", withClass(edit(pool, "duration: 8h", "duration: 90s")),
			[]string{`nodepools/default.yaml:38: spec.disruption.budgets[1].duration: 1m30s must be whole minutes or hours (e.g. 30m, 8h, 1h30m)`}},
		{"budget duration not a duration", withClass(edit(pool, "duration: 8h", "duration: 8 hours")),
			[]string{`nodepools/default.yaml:38: spec.disruption.budgets[1].duration: "8 hours" is not a duration (e.g. 30s, 5m, 1h30m)`}},
		{"budget reason", withClass(edit(pool, "        duration: 8h\n", "        duration: 8h\n        reasons: [Expired]\n")),
			[]string{`nodepools/default.yaml:39: spec.disruption.budgets[1].reasons[0]: "Expired" is not one of Underutilized, Empty, Drifted`}},
		{"weight too low", withClass(edit(pool, "weight: 10", "weight: 0")),
			[]string{`nodepools/default.yaml:39: spec.weight: 0 is outside 1..100`}},
		{"weight too high", withClass(edit(pool, "weight: 10", "weight: 101")),
			[]string{`nodepools/default.yaml:39: spec.weight: 101 is outside 1..100`}},
		{"weight not an integer", withClass(edit(pool, "weight: 10", "weight: ten")),
			[]string{`nodepools/default.yaml:39: spec.weight: expected an integer, got "ten"`}},
		{"expireAfter days", withClass(edit(pool, "        name: default\n  limits:", "        name: default\n      expireAfter: 30d\n  limits:")),
			[]string{`nodepools/default.yaml:29: spec.template.spec.expireAfter: "30d" is not a duration (e.g. 30s, 5m, 720h) or "Never"`}},
		{"terminationGracePeriod negative", withClass(edit(pool, "        name: default\n  limits:", "        name: default\n      terminationGracePeriod: -1h\n  limits:")),
			[]string{`nodepools/default.yaml:29: spec.template.spec.terminationGracePeriod: -1h0m0s must not be negative`}},
		{"consolidateAfter required", withClass(edit(pool, "    consolidateAfter: 30s\n", "")),
			[]string{`nodepools/default.yaml:31: spec.disruption.consolidateAfter: required field is missing (a duration such as 0s, 30s, 5m, or Never)`}},
		{"consolidateAfter bad", withClass(edit(pool, "consolidateAfter: 30s", "consolidateAfter: soon")),
			[]string{`nodepools/default.yaml:33: spec.disruption.consolidateAfter: "soon" is not a duration (e.g. 30s, 5m, 720h) or "Never"`}},
		{"v1beta1 policy in v1", withClass(edit(pool, "consolidationPolicy: WhenEmpty", "consolidationPolicy: WhenUnderutilized")),
			[]string{`nodepools/default.yaml:32: spec.disruption.consolidationPolicy: "WhenUnderutilized" is karpenter.sh/v1beta1; use WhenEmptyOrUnderutilized`}},
		{"unknown policy", withClass(edit(pool, "consolidationPolicy: WhenEmpty", "consolidationPolicy: Always")),
			[]string{`nodepools/default.yaml:32: spec.disruption.consolidationPolicy: "Always" is not one of WhenEmpty, WhenEmptyOrUnderutilized, Balanced`}},
		{"negative limit", withClass(edit(pool, `cpu: "1000"`, `cpu: "-1"`)),
			[]string{`nodepools/default.yaml:30: spec.limits[cpu]: -1 must not be negative`}},
		{"limit not a quantity", withClass(edit(pool, `cpu: "1000"`, `cpu: lots`)),
			[]string{`nodepools/default.yaml:30: spec.limits[cpu]: "lots" is not a quantity (e.g. 1000, 500m, 2Gi)`}},
		{"nodeClassRef unresolved", withClass(edit(pool, "        name: default\n  limits", "        name: gpu\n  limits")),
			[]string{`nodepools/default.yaml:28: spec.template.spec.nodeClassRef.name: EC2NodeClass "gpu" is not defined in the loaded files`}},
		{"nodeClassRef missing", withClass(edit(pool, "      nodeClassRef:\n        group: karpenter.k8s.aws\n        kind: EC2NodeClass\n        name: default\n", "")),
			[]string{`nodepools/default.yaml:10: spec.template.spec.nodeClassRef: required field is missing`}},
		{"nodeClassRef other kind", withClass(edit(pool, "kind: EC2NodeClass", "kind: AKSNodeClass")),
			[]string{`nodepools/default.yaml:27: spec.template.spec.nodeClassRef.kind: "AKSNodeClass" is not supported: nodewright node classes are karpenter.k8s.aws/EC2NodeClass`}},
		{"nodeClassRef apiVersion as group", withClass(edit(pool, "group: karpenter.k8s.aws", "group: karpenter.k8s.aws/v1")),
			[]string{`nodepools/default.yaml:26: spec.template.spec.nodeClassRef.group: "karpenter.k8s.aws/v1" is a group, not an apiVersion: use "karpenter.k8s.aws"`}},
		{"bad name", withClass(edit(pool, "  name: default\nspec", "  name: Default_Pool\nspec")),
			[]string{`nodepools/default.yaml:4: metadata.name: "Default_Pool" is not a valid name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"duplicate YAML key", withClass(edit(pool, "  weight: 10", "  weight: 10\n  weight: 20")),
			[]string{`nodepools/default.yaml:40: spec.weight: duplicate field (first set on line 39)`}},
		{"requirements not a list", withClass(edit(pool, "      requirements:\n", "      requirements: none\n      x-requirements:\n")),
			[]string{
				`nodepools/default.yaml:11: spec.template.spec.requirements: expected a list, got "none"`,
				`nodepools/default.yaml:12: spec.template.spec.x-requirements: unknown field (did you mean "requirements"?)`,
			}},
		{"invalid YAML", "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: [unclosed\n",
			[]string{`nodepools/default.yaml:4: invalid YAML: did not find expected ',' or ']'`}},
		{"several errors at once in line order", withClass(edit(pool,
			"operator: Gt", "operator: Ge",
			"team: platform", "karpenter.sh/team: platform",
			"weight: 10", "weight: 1000")),
			[]string{
				`nodepools/default.yaml:9: spec.template.metadata.labels[karpenter.sh/team]: label domain "karpenter.sh" is restricted`,
				`nodepools/default.yaml:19: spec.template.spec.requirements[2].operator: "Ge" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte`,
				`nodepools/default.yaml:39: spec.weight: 1000 is outside 1..100`,
			}},
		{"duplicate NodePool", withClass(pool + "---\n" + pool),
			[]string{`nodepools/default.yaml:44: metadata.name: NodePool "default" is already defined at nodepools/default.yaml:4`}},
		{"unsupported NodePool version", withClass(edit(pool, "karpenter.sh/v1", "karpenter.sh/v2")),
			[]string{`nodepools/default.yaml:1: apiVersion: "karpenter.sh/v2" is not supported for NodePool (use karpenter.sh/v1)`}},
		{"NodePool without apiVersion", withClass(edit(pool, "apiVersion: karpenter.sh/v1\n", "")),
			[]string{`nodepools/default.yaml:1: apiVersion: required field is missing (karpenter.sh/v1 or karpenter.k8s.aws/v1)`}},
		{"kind missing", "apiVersion: karpenter.sh/v1\nmetadata:\n  name: default\n",
			[]string{`nodepools/default.yaml:1: kind: required field is missing (NodePool or EC2NodeClass)`}},
		{"not an object", "- a\n- b\n", []string{`nodepools/default.yaml:1: expected a Kubernetes object (a mapping with apiVersion and kind), got a list`}},

		// EC2NodeClass.
		{"role and instanceProfile", classFirst(edit(class, "  role: KarpenterNodeRole-demo\n", "  role: KarpenterNodeRole-demo\n  instanceProfile: demo\n")),
			[]string{`nodepools/default.yaml:5: spec: must specify exactly one of ['role', 'instanceProfile']`}},
		{"neither role nor instanceProfile", classFirst(edit(class, "  role: KarpenterNodeRole-demo\n", "")),
			[]string{`nodepools/default.yaml:5: spec: must specify exactly one of ['role', 'instanceProfile']`}},
		{"empty subnet terms", classFirst(edit(class, "  subnetSelectorTerms:\n    - tags:\n        karpenter.sh/discovery: demo\n", "  subnetSelectorTerms: []\n")),
			[]string{`nodepools/default.yaml:9: spec.subnetSelectorTerms: subnetSelectorTerms cannot be empty`}},
		{"missing subnet terms", classFirst(edit(class, "  subnetSelectorTerms:\n    - tags:\n        karpenter.sh/discovery: demo\n", "")),
			[]string{`nodepools/default.yaml:5: spec.subnetSelectorTerms: required field is missing`}},
		{"empty subnet term", classFirst(edit(class, "  subnetSelectorTerms:\n    - tags:\n        karpenter.sh/discovery: demo\n", "  subnetSelectorTerms:\n    - {}\n")),
			[]string{`nodepools/default.yaml:10: spec.subnetSelectorTerms[0]: expected at least one, got none, ['tags', 'id']`}},
		{"subnet id and tags", classFirst(edit(class, "    - tags:\n        karpenter.sh/discovery: demo\n  securityGroupSelectorTerms", "    - id: subnet-0abc\n      tags:\n        karpenter.sh/discovery: demo\n  securityGroupSelectorTerms")),
			[]string{`nodepools/default.yaml:10: spec.subnetSelectorTerms[0]: 'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term`}},
		{"empty tag value", classFirst(edit(class, "karpenter.sh/discovery: demo\n  securityGroupSelectorTerms", "karpenter.sh/discovery: \"\"\n  securityGroupSelectorTerms")),
			[]string{`nodepools/default.yaml:10: spec.subnetSelectorTerms[0].tags: empty tag keys or values aren't supported`}},
		{"sg name and tags", classFirst(edit(class, "  securityGroupSelectorTerms:\n    - tags:", "  securityGroupSelectorTerms:\n    - name: web\n      tags:")),
			[]string{`nodepools/default.yaml:13: spec.securityGroupSelectorTerms[0]: 'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term`}},
		{"sg bad id", classFirst(edit(class, "  securityGroupSelectorTerms:\n    - tags:\n        karpenter.sh/discovery: demo\n", "  securityGroupSelectorTerms:\n    - id: group-1\n")),
			[]string{`nodepools/default.yaml:13: spec.securityGroupSelectorTerms[0].id: "group-1" is not a security group id (sg-...)`}},
		{"alias version typo", classFirst(edit(class, "al2023@latest", "al2023@lastest")),
			[]string{`nodepools/default.yaml:7: spec.amiSelectorTerms[0].alias: version "lastest" of "al2023@lastest" is not "latest" or a release like v20240625`}},
		{"alias family", classFirst(edit(class, "al2023@latest", "ubuntu@latest")),
			[]string{`nodepools/default.yaml:7: spec.amiSelectorTerms[0].alias: family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'`}},
		{"alias format", classFirst(edit(class, "al2023@latest", "al2023")),
			[]string{`nodepools/default.yaml:7: spec.amiSelectorTerms[0].alias: 'alias' is improperly formatted, must match the format 'family@version'`}},
		{"windows pinned", classFirst(edit(class, "al2023@latest", "windows2022@v20240101")),
			[]string{`nodepools/default.yaml:7: spec.amiSelectorTerms[0].alias: windows families may only specify version 'latest'`}},
		{"alias with other terms", classFirst(edit(class, "    - alias: al2023@latest\n", "    - alias: al2023@latest\n    - alias: bottlerocket@latest\n")),
			[]string{
				`nodepools/default.yaml:6: spec.amiSelectorTerms: 'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms`,
				`nodepools/default.yaml:6: spec.amiSelectorTerms: 'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms`,
			}},
		{"alias and id in a term", classFirst(edit(class, "    - alias: al2023@latest\n", "    - alias: al2023@latest\n      id: ami-0123\n")),
			[]string{`nodepools/default.yaml:7: spec.amiSelectorTerms[0]: 'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms`}},
		{"amiFamily required without alias", classFirst(edit(class, "    - alias: al2023@latest\n", "    - id: ami-0123abc\n")),
			[]string{`nodepools/default.yaml:5: spec.amiFamily: must specify amiFamily if amiSelectorTerms does not contain an alias`}},
		{"amiFamily conflicts with alias", classFirst(edit(class, "  role:", "  amiFamily: AL2\n  role:")),
			[]string{`nodepools/default.yaml:8: spec.amiFamily: if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias`}},
		{"amiFamily unknown", classFirst(edit(class, "    - alias: al2023@latest\n", "    - id: ami-0123abc\n  amiFamily: Ubuntu2\n")),
			[]string{`nodepools/default.yaml:8: spec.amiFamily: "Ubuntu2" is not one of AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022, Windows2025`}},
		{"no amiSelectorTerms", classFirst(edit(class, "  amiSelectorTerms:\n    - alias: al2023@latest\n", "")),
			[]string{`nodepools/default.yaml:5: spec.amiSelectorTerms: required field is missing (e.g. [{alias: al2023@latest}])`}},
		{"two root volumes", classFirst(edit(class, "  kubelet:", "    - deviceName: /dev/xvdb\n      rootVolume: true\n      ebs:\n        volumeSize: 20Gi\n  kubelet:")),
			[]string{`nodepools/default.yaml:15: spec.blockDeviceMappings: must have only one blockDeviceMappings with rootVolume`}},
		{"volume size unit", classFirst(edit(class, "volumeSize: 100Gi", "volumeSize: 100Mi")),
			[]string{`nodepools/default.yaml:19: spec.blockDeviceMappings[0].ebs.volumeSize: 100Mi is not a volume size in Gi, G, Ti or T (e.g. 100Gi, at most 64T)`}},
		{"volume type", classFirst(edit(class, "volumeType: gp3", "volumeType: gp4")),
			[]string{`nodepools/default.yaml:20: spec.blockDeviceMappings[0].ebs.volumeType: "gp4" is not one of standard, io1, io2, gp2, sc1, st1, gp3`}},
		{"ebs without size or snapshot", classFirst(edit(class, "        volumeSize: 100Gi\n", "")),
			[]string{`nodepools/default.yaml:18: spec.blockDeviceMappings[0].ebs: snapshotID or volumeSize must be defined`}},
		{"evictionSoft without grace period", classFirst(edit(class, "    maxPods: 110\n", "    maxPods: 110\n    evictionSoft:\n      memory.available: 500Mi\n")),
			[]string{`nodepools/default.yaml:24: spec.kubelet.evictionSoft[memory.available]: evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod`}},
		{"grace period without evictionSoft", classFirst(edit(class, "    maxPods: 110\n", "    maxPods: 110\n    evictionSoftGracePeriod:\n      memory.available: 1m\n")),
			[]string{`nodepools/default.yaml:24: spec.kubelet.evictionSoftGracePeriod[memory.available]: evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft`}},
		{"eviction signal", classFirst(edit(class, "    maxPods: 110\n", "    maxPods: 110\n    evictionHard:\n      memory.free: 5%\n")),
			[]string{`nodepools/default.yaml:24: spec.kubelet.evictionHard[memory.free]: valid keys for evictionHard are ['memory.available','nodefs.available','nodefs.inodesFree','imagefs.available','imagefs.inodesFree','pid.available']`}},
		{"kubeReserved negative", classFirst(edit(class, "    maxPods: 110\n", "    maxPods: 110\n    kubeReserved:\n      cpu: -100m\n")),
			[]string{`nodepools/default.yaml:24: spec.kubelet.kubeReserved[cpu]: kubeReserved value cannot be a negative resource quantity`}},
		{"imageGC thresholds", classFirst(edit(class, "    maxPods: 110\n", "    maxPods: 110\n    imageGCHighThresholdPercent: 50\n    imageGCLowThresholdPercent: 60\n")),
			[]string{`nodepools/default.yaml:21: spec.kubelet: imageGCHighThresholdPercent must be greater than imageGCLowThresholdPercent`}},
		{"clusterDNS not an IP", classFirst(edit(class, "    maxPods: 110\n", "    maxPods: 110\n    clusterDNS: [kube-dns]\n")),
			[]string{`nodepools/default.yaml:23: spec.kubelet.clusterDNS[0]: "kube-dns" is not an IP address`}},
		{"httpTokens enum", classFirst(edit(class, "  kubelet:", "  metadataOptions:\n    httpTokens: requried\n  kubelet:")),
			[]string{`nodepools/default.yaml:22: spec.metadataOptions.httpTokens: "requried" is not one of required, optional`}},
		{"hop limit range", classFirst(edit(class, "  kubelet:", "  metadataOptions:\n    httpPutResponseHopLimit: 65\n  kubelet:")),
			[]string{`nodepools/default.yaml:22: spec.metadataOptions.httpPutResponseHopLimit: 65 is outside 1..64`}},
		{"restricted tag", classFirst(edit(class, "  kubelet:", "  tags:\n    kubernetes.io/cluster/demo: owned\n  kubelet:")),
			[]string{`nodepools/default.yaml:22: spec.tags[kubernetes.io/cluster/demo]: tag contains a restricted tag matching kubernetes.io/cluster/`}},
		{"nodewright ownership tag", classFirst(edit(class, "  kubelet:", "  tags:\n    nodewright.io/managed-by: nodewright\n  kubelet:")),
			[]string{`nodepools/default.yaml:22: spec.tags[nodewright.io/managed-by]: tag contains a restricted tag matching nodewright.io/`}},
		{"instanceStorePolicy", classFirst(edit(class, "  kubelet:", "  instanceStorePolicy: RAID1\n  kubelet:")),
			[]string{`nodepools/default.yaml:21: spec.instanceStorePolicy: "RAID1" is not one of RAID0`}},
		{"bool field", classFirst(edit(class, "  kubelet:", "  detailedMonitoring: yes\n  kubelet:")),
			[]string{`nodepools/default.yaml:21: spec.detailedMonitoring: expected true or false, got "yes"`}},

		// Other kinds and versions.
		{"provisioner", "apiVersion: karpenter.sh/v1alpha5\nkind: Provisioner\nmetadata:\n  name: default\n",
			[]string{`nodepools/default.yaml:2: kind: karpenter.sh/v1alpha5 Provisioner is not supported: migrate it to a karpenter.sh/v1 NodePool`}},
		{"unknown karpenter kind", "apiVersion: karpenter.sh/v1\nkind: NodeGroup\nmetadata:\n  name: default\n",
			[]string{`nodepools/default.yaml:2: kind: karpenter.sh/v1 "NodeGroup" is not a kind nodewright configures (NodePool, EC2NodeClass)`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadData(testFile, []byte(tc.doc))
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("want ErrorList, got %v", err)
			}
			got := make([]string, len(list))
			for i, e := range list {
				got[i] = e.Error()
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\ngot:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
