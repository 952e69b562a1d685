package apis

import (
	"errors"
	"strings"
	"testing"
)

// v114Class uses every EC2NodeClass field added up to Karpenter v1.14.
const v114Class = `apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  amiFamily: AL2023
  amiSelectorTerms:
    - ssmParameter: /aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id
  role: KarpenterNodeRole-demo
  subnetSelectorTerms:
    - id: subnet-0a1b2c3d4e5f60718
    - id: subnet-0e1f2a3b4c5d60718
  securityGroupSelectorTerms:
    - id: sg-0a1b2c3d4e5f60718
    - id: sg-0e1f2a3b4c5d60718
  capacityReservationSelectorTerms:
    - id: cr-0123456789abcdef0
    - tags:
        team: ml
      ownerID: "123456789012"
    - instanceMatchCriteria: open
  placementGroupSelector:
    name: training
  ipPrefixCount: 1
  networkInterfaces:
    - networkCardIndex: 0
      deviceIndex: 0
      interfaceType: interface
    - networkCardIndex: 1
      deviceIndex: 0
      interfaceType: efa-only
  connectionTracking:
    tcpEstablishedTimeout: 3600
    udpStreamTimeout: 120
    udpTimeout: 30
  cpuOptions:
    nestedVirtualization: enabled
  metadataOptions:
    httpProtocolIPv6: enabled
  blockDeviceMappings:
    - deviceName: /dev/xvda
      rootVolume: true
      ebs:
        snapshotID: snap-0123456789abcdef0
        volumeInitializationRate: 200
  kubelet:
    evictionSoft:
      memory.available: 500Mi
    evictionSoftGracePeriod:
      memory.available: 1m
`

func TestEveryV114FieldLoads(t *testing.T) {
	static := edit(pool, "  weight: 10\n", "  replicas: 3\n", "    cpu: \"1000\"", "    nodes: \"5\"",
		`values: ["spot"]`, `values: ["reserved", "on-demand"]`)
	cfg, err := LoadData("v114.yaml", []byte(v114Class+"---\n"+static))
	if err != nil {
		t.Fatal(err)
	}
	// Every field here is honoured: none is warned about.
	if len(cfg.Warnings) != 0 {
		t.Fatalf("warnings %v", cfg.Warnings)
	}
	s := cfg.NodeClass("default").Spec
	switch {
	case s.AMISelectorTerms[0].SSMParameter == "", len(s.CapacityReservationSelectorTerms) != 3,
		s.CapacityReservationSelectorTerms[1].OwnerID != "123456789012", *s.PlacementGroupSelector.Name != "training",
		*s.IPPrefixCount != 1, s.NetworkInterfaces[1].InterfaceType != InterfaceTypeEFAOnly,
		*s.ConnectionTracking.UDPTimeout != 30, *s.CPUOptions.NestedVirtualization != "enabled",
		*s.MetadataOptions.HTTPProtocolIPv6 != "enabled", *s.BlockDeviceMappings[0].EBS.VolumeInitializationRate != 200:
		t.Errorf("fields not carried: %+v", s)
	}
	if r := cfg.NodePool("default").Spec.Replicas; r == nil || *r != 3 {
		t.Errorf("replicas %v", r)
	}
	// New fields are deep-copied and (except the selectors) hashed.
	nc := cfg.NodeClass("default")
	cp := nc.DeepCopy()
	*cp.Spec.CPUOptions.NestedVirtualization = "disabled"
	*cp.Spec.NetworkInterfaces[1].DeviceIndex = 1
	*cp.Spec.ConnectionTracking.UDPTimeout = 60
	if *nc.Spec.CPUOptions.NestedVirtualization != "enabled" || *nc.Spec.NetworkInterfaces[1].DeviceIndex != 0 || *nc.Spec.ConnectionTracking.UDPTimeout != 30 {
		t.Error("copy shares memory with the original")
	}
	if cp.Hash() == nc.Hash() {
		t.Error("cpuOptions/networkInterfaces/connectionTracking not hashed")
	}
	cp = nc.DeepCopy()
	cp.Spec.CapacityReservationSelectorTerms = nil
	*cp.Spec.IPPrefixCount = 4
	if cp.Hash() != nc.Hash() {
		t.Error("capacity reservations and ipPrefixCount must not cause drift (Karpenter ignores them in its hash)")
	}
}

func TestWindows2025(t *testing.T) {
	for _, c := range []struct{ from, to string }{
		{"    - alias: al2023@latest\n", "    - alias: windows2025@latest\n"},
		{"    - alias: al2023@latest\n", "    - alias: windows2025@latest\n  amiFamily: Windows2025\n"},
	} {
		cfg, err := LoadData("w.yaml", []byte(edit(class, c.from, c.to)))
		if err != nil {
			t.Fatal(err)
		}
		if fam := cfg.NodeClass("default").AMIFamily(); fam != AMIFamilyWindows2025 {
			t.Errorf("family %q", fam)
		}
	}
}

func TestV114ValidationErrors(t *testing.T) {
	cases := []struct {
		name     string
		from, to string
		want     string
	}{
		{"ssm with nothing", "ssmParameter: /aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id", "ssmParameter: \"\"",
			"v.yaml:8: spec.amiSelectorTerms[0]: expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
		{"reservation id with owner", "    - id: cr-0123456789abcdef0\n", "    - id: cr-0123456789abcdef0\n      ownerID: \"123456789012\"\n",
			"v.yaml:17: spec.capacityReservationSelectorTerms[0]: 'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
		{"reservation id pattern", "id: cr-0123456789abcdef0", "id: odcr-1",
			`v.yaml:17: spec.capacityReservationSelectorTerms[0].id: "odcr-1" is not a capacity reservation id (cr-...)`},
		{"reservation owner pattern", `ownerID: "123456789012"`, `ownerID: "1234"`,
			`v.yaml:20: spec.capacityReservationSelectorTerms[1].ownerID: "1234" is not a 12-digit AWS account id`},
		{"reservation criteria", "instanceMatchCriteria: open", "instanceMatchCriteria: any",
			`v.yaml:21: spec.capacityReservationSelectorTerms[2].instanceMatchCriteria: "any" is not one of open, targeted`},
		{"reservation empty term", "    - instanceMatchCriteria: open\n", "    - ownerID: \"123456789012\"\n",
			"v.yaml:21: spec.capacityReservationSelectorTerms[2]: expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
		{"placement both", "    name: training\n", "    name: training\n    id: pg-0123\n",
			"v.yaml:22: spec.placementGroupSelector: 'name' and 'id' are mutually exclusive"},
		{"placement id", "    name: training\n", "    id: placement-1\n",
			`v.yaml:23: spec.placementGroupSelector.id: "placement-1" is not a placement group id (pg-...)`},
		{"prefix count", "ipPrefixCount: 1", "ipPrefixCount: -1", "v.yaml:24: spec.ipPrefixCount: -1 must not be negative"},
		{"no primary interface", "      deviceIndex: 0\n      interfaceType: interface", "      deviceIndex: 0\n      interfaceType: efa-only",
			"v.yaml:25: spec.networkInterfaces: networkInterfaces must include a primary interface with interfaceType='interface'"},
		{"two efa on a card", "    - networkCardIndex: 1\n      deviceIndex: 0\n      interfaceType: efa-only\n",
			"    - networkCardIndex: 1\n      deviceIndex: 0\n      interfaceType: efa-only\n    - networkCardIndex: 1\n      deviceIndex: 1\n      interfaceType: efa-only\n",
			"v.yaml:25: spec.networkInterfaces: networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"},
		{"interface field missing", "    - networkCardIndex: 1\n      deviceIndex: 0\n", "    - networkCardIndex: 1\n",
			"v.yaml:29: spec.networkInterfaces[1].deviceIndex: required field is missing"},
		{"interface type", "interfaceType: efa-only", "interfaceType: efa",
			`v.yaml:31: spec.networkInterfaces[1].interfaceType: "efa" is not one of interface, efa-only`},
		{"tracking empty", "    tcpEstablishedTimeout: 3600\n    udpStreamTimeout: 120\n    udpTimeout: 30\n", "    {}\n",
			"v.yaml:32: spec.connectionTracking: at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"},
		{"tracking range", "udpTimeout: 30", "udpTimeout: 61", "v.yaml:35: spec.connectionTracking.udpTimeout: 61 is outside 30..60"},
		{"nested virtualization", "nestedVirtualization: enabled", "nestedVirtualization: on",
			`v.yaml:37: spec.cpuOptions.nestedVirtualization: "on" is not one of enabled, disabled`},
		{"initialization rate range", "volumeInitializationRate: 200", "volumeInitializationRate: 50",
			"v.yaml:45: spec.blockDeviceMappings[0].ebs.volumeInitializationRate: 50 is outside 100..300"},
		{"initialization rate without snapshot", "        snapshotID: snap-0123456789abcdef0\n", "        volumeSize: 20Gi\n",
			"v.yaml:43: spec.blockDeviceMappings[0].ebs: snapshotID must be set when volumeInitializationRate is set"},
		{"windows2025 pinned", "  amiFamily: AL2023\n  amiSelectorTerms:\n    - ssmParameter: /aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id\n",
			"  amiSelectorTerms:\n    - alias: windows2025@v20250101\n",
			"v.yaml:7: spec.amiSelectorTerms[0].alias: windows families may only specify version 'latest'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadData("v.yaml", []byte(edit(v114Class, c.from, c.to)))
			var list ErrorList
			if !errors.As(err, &list) || len(list) != 1 || list[0].Error() != c.want {
				t.Errorf("got %v\nwant %s", err, c.want)
			}
		})
	}
}

func TestInclusiveOperatorsAndBalanced(t *testing.T) {
	doc := edit(pool, "operator: Gt\n          values: [\"5\"]", "operator: Gte\n          values: [\"6\"]\n        - key: karpenter.k8s.aws/instance-cpu\n          operator: Lte\n          values: [\"16\"]",
		"consolidationPolicy: WhenEmpty", "consolidationPolicy: Balanced")
	cfg, err := LoadData("p.yaml", []byte(doc+"---\n"+class))
	if err != nil {
		t.Fatal(err)
	}
	// Gte 6 is Gt 5 and Lte 16 is Lt 17 on integers: downstream code sees
	// only the Kubernetes operators.
	reqs := cfg.NodePool("default").Spec.Template.Spec.Requirements
	if r := reqs[2]; r.Operator != "Gt" || r.Values[0] != "5" {
		t.Errorf("Gte became %+v", r)
	}
	if r := reqs[3]; r.Operator != "Lt" || r.Values[0] != "17" {
		t.Errorf("Lte became %+v", r)
	}
	// Balanced is honoured (internal/disruption scores its moves): no warning.
	if len(cfg.Warnings) != 0 || cfg.NodePool("default").Spec.Disruption.ConsolidationPolicy != ConsolidationPolicyBalanced {
		t.Errorf("warnings %v", cfg.Warnings)
	}
	_, err = LoadData("p.yaml", []byte(edit(doc, `values: ["6"]`, `values: ["-1"]`)+"---\n"+class))
	if err == nil || !strings.Contains(err.Error(), `spec.template.spec.requirements[2].values: operator Gte takes exactly one non-negative integer value, got ["-1"]`) {
		t.Errorf("negative Gte: %v", err)
	}
}
