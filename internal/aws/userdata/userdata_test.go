package userdata

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func ptr[T any](v T) *T { return &v }

// base is a NodeClaim-like input: NodePool labels, a NodePool taint, a startup
// taint and the unregistered taint, plus a full kubelet configuration.
func base(f Family) Options {
	return Options{
		Family:          f,
		ClusterName:     "demo",
		ClusterEndpoint: "https://ABCDEF.gr7.us-west-2.eks.amazonaws.com",
		CABundle:        "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
		ServiceCIDR:     "10.100.0.0/16",
		Kubelet: Kubelet{
			ClusterDNS:                  []string{"10.100.0.10"},
			MaxPods:                     ptr[int32](58),
			SystemReserved:              map[string]string{"memory": "100Mi", "cpu": "100m"},
			KubeReserved:                map[string]string{"memory": "893Mi", "cpu": "70m", "ephemeral-storage": "1Gi"},
			EvictionHard:                map[string]string{"memory.available": "100Mi", "nodefs.available": "10%"},
			EvictionSoft:                map[string]string{"memory.available": "500Mi"},
			EvictionSoftGracePeriod:     map[string]time.Duration{"memory.available": time.Minute},
			EvictionMaxPodGracePeriod:   ptr[int32](60),
			ImageGCHighThresholdPercent: ptr[int32](85),
			ImageGCLowThresholdPercent:  ptr[int32](80),
			CPUCFSQuota:                 ptr(true),
		},
		Labels: map[string]string{
			"karpenter.sh/nodepool":            "default",
			"karpenter.sh/capacity-type":       "spot",
			"node.kubernetes.io/instance-type": "m5.large",
			"team":                             "payments",
		},
		Taints: []corev1.Taint{
			{Key: "dedicated", Value: "payments", Effect: corev1.TaintEffectNoSchedule},
			{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoExecute},
			{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute},
		},
	}
}

// custom is a golden case: the family's base options with the
// EC2NodeClass's user data set, then edits applied.
func custom(f Family, userData string, edits ...func(*Options)) func() Options {
	return func() Options {
		o := base(f)
		o.Custom = userData
		for _, edit := range edits {
			edit(&o)
		}
		return o
	}
}

func TestGolden(t *testing.T) {
	raid0 := func(o *Options) { o.InstanceStorePolicy = "RAID0" }
	cases := map[string]func() Options{
		"al2023":              func() Options { return base(AL2023) },
		"al2023-custom-shell": custom(AL2023, "#!/bin/bash\necho 'hello from the EC2NodeClass'\n"),
		"al2023-custom-nodeconfig": custom(AL2023,
			"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n", raid0),
		"al2023-custom-mime": custom(AL2023, "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n#!/bin/bash\necho first\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    flags:\n    - --v=4\n--BOUNDARY--\n"),
		"al2":                func() Options { return base(AL2) },
		"al2-custom-shell":   custom(AL2, "#!/bin/bash\nyum install -y amazon-ssm-agent\n", func(o *Options) { o.Kubelet = Kubelet{} }),
		"al2-ipv6": func() Options {
			o := base(AL2)
			o.Kubelet = Kubelet{ClusterDNS: []string{"fd00:10:96::a"}}
			return o
		},
		"bottlerocket": func() Options { return base(Bottlerocket) },
		"bottlerocket-custom": custom(Bottlerocket,
			"[settings.kubernetes]\ncluster-name = 'wrong'\n[settings.kubernetes.node-labels]\nteam = 'platform'\nfrom-user = 'yes'\n[settings.host-containers.admin]\nenabled = true\n", raid0),
		"windows2022": custom(Windows2022, "<powershell>\nWrite-Host 'custom step'\n</powershell>"),
		"custom":      custom(Custom, "#!/bin/bash\n/opt/my-bootstrap --cluster demo\n"),
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := Generate(mk())
			if err != nil {
				t.Fatal(err)
			}
			// Map iteration order must never leak into the output.
			for range 5 {
				again, err := Generate(mk())
				if err != nil || again != got {
					t.Fatalf("output not deterministic (err %v)", err)
				}
			}
			path := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/aws/userdata -update)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (rerun with -update if intended)\n--- got ---\n%s", path, got)
			}
		})
	}
}

// generated is the user data of the family's base options with the
// EC2NodeClass's user data set, failing t if it cannot be generated.
func generated(t *testing.T, f Family, userData string) string {
	t.Helper()
	out, err := Generate(custom(f, userData)())
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// mimeParts are the parts of generated AL2023 user data, failing t if it is
// not valid MIME.
func mimeParts(t *testing.T, out string) []Part {
	t.Helper()
	parts, err := ParseMIME(out)
	if err != nil {
		t.Fatalf("output is not valid MIME: %v", err)
	}
	return parts
}

func TestAL2023MergesUserPartsBeforeOurs(t *testing.T) {
	const script = "#!/bin/bash\necho hi\n"
	parts := mimeParts(t, generated(t, AL2023, script))
	if len(parts) != 2 {
		t.Fatalf("want 2 parts, got %d", len(parts))
	}
	if parts[0].ContentType != ContentTypeShell || parts[0].Content != script {
		t.Errorf("first part should be the user's script unchanged, got %+v", parts[0])
	}
	if parts[1].ContentType != ContentTypeNodeConfig {
		t.Fatalf("last part should be the NodeConfig, got %q", parts[1].ContentType)
	}
	var nc nodeConfig
	if err := yaml.Unmarshal([]byte(parts[1].Content), &nc); err != nil {
		t.Fatal(err)
	}
	if nc.APIVersion != "node.eks.aws/v1alpha1" || nc.Spec.Cluster.CIDR != "10.100.0.0/16" || nc.Spec.Cluster.Name != "demo" {
		t.Errorf("NodeConfig cluster section wrong: %+v", nc)
	}
	taints, _ := nc.Spec.Kubelet.Config["registerWithTaints"].([]any)
	if len(taints) != 3 {
		t.Fatalf("want 3 registerWithTaints, got %v", nc.Spec.Kubelet.Config["registerWithTaints"])
	}
	last, _ := taints[2].(map[string]any)
	if last["key"] != "karpenter.sh/unregistered" || last["effect"] != "NoExecute" {
		t.Errorf("unregistered taint missing or reordered: %v", last)
	}
	if mp := nc.Spec.Kubelet.Config["maxPods"]; mp != float64(58) {
		t.Errorf("maxPods = %v", mp)
	}
	if f := nc.Spec.Kubelet.Flags; len(f) != 1 || !strings.Contains(f[0], "team=payments") {
		t.Errorf("node labels flag wrong: %v", f)
	}
}

func TestAL2023YAMLCustomBecomesNodeConfigPart(t *testing.T) {
	parts := mimeParts(t, generated(t, AL2023, "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec: {}\n"))
	if parts[0].ContentType != ContentTypeNodeConfig {
		t.Errorf("YAML user data should become a NodeConfig part, got %q", parts[0].ContentType)
	}
}

func TestAL2BootstrapArgs(t *testing.T) {
	out := generated(t, AL2, "")
	for _, want := range []string{
		"/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint 'https://ABCDEF.gr7.us-west-2.eks.amazonaws.com' --b64-cluster-ca 'LS0t",
		"--dns-cluster-ip '10.100.0.10'",
		"--use-max-pods false",
		`--register-with-taints="dedicated=payments:NoSchedule,example.com/agent-not-ready:NoExecute,karpenter.sh/unregistered:NoExecute"`,
		`--node-labels="karpenter.sh/capacity-type=spot,karpenter.sh/nodepool=default,node.kubernetes.io/instance-type=m5.large,team=payments"`,
		"--max-pods=58",
		`--eviction-hard="memory.available<100Mi,nodefs.available<10%"`,
		`--eviction-soft-grace-period="memory.available=1m0s"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("AL2 user data lacks %q", want)
		}
	}
}

func TestBottlerocketMergesSettings(t *testing.T) {
	out := generated(t, Bottlerocket, "[settings.kubernetes]\ncluster-name = 'wrong'\nallowed-unsafe-sysctls = ['net.core.somaxconn']\n[settings.kubernetes.node-labels]\nteam = 'platform'\nfrom-user = 'yes'\n")
	var doc struct {
		Settings struct {
			Kubernetes struct {
				ClusterName  string              `toml:"cluster-name"`
				APIServer    string              `toml:"api-server"`
				DNS          string              `toml:"cluster-dns-ip"`
				Sysctls      []string            `toml:"allowed-unsafe-sysctls"`
				Labels       map[string]string   `toml:"node-labels"`
				Taints       map[string][]string `toml:"node-taints"`
				MaxPods      int                 `toml:"max-pods"`
				KubeReserved map[string]string   `toml:"kube-reserved"`
			} `toml:"kubernetes"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(out, &doc); err != nil {
		t.Fatalf("output is not TOML: %v\n%s", err, out)
	}
	k := doc.Settings.Kubernetes
	if k.ClusterName != "demo" || k.APIServer != base(Bottlerocket).ClusterEndpoint || k.DNS != "10.100.0.10" {
		t.Errorf("cluster settings not enforced: %+v", k)
	}
	if len(k.Sysctls) != 1 {
		t.Errorf("user setting dropped: %+v", k.Sysctls)
	}
	if k.Labels["team"] != "payments" || k.Labels["from-user"] != "yes" {
		t.Errorf("labels not merged with ours winning: %v", k.Labels)
	}
	if got := k.Taints["karpenter.sh/unregistered"]; len(got) != 1 || got[0] != ":NoExecute" {
		t.Errorf("unregistered taint: %v", k.Taints)
	}
	if k.MaxPods != 58 || k.KubeReserved["memory"] != "893Mi" {
		t.Errorf("kubelet settings: max-pods %d kube-reserved %v", k.MaxPods, k.KubeReserved)
	}
}

func TestBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		in   func() Options
		is   error // when set, the error must also wrap it
		want string
	}{
		"missing service CIDR": {in: custom(AL2023, "", func(o *Options) { o.ServiceCIDR = "" }), is: ErrMissingField, want: "ServiceCIDR"},
		"broken TOML":          {in: custom(Bottlerocket, "[settings\nbroken"), want: "not valid TOML"},
		"settings not a table": {in: custom(Bottlerocket, "settings = 3\n"), want: "must be a TOML table"},
		"non-multipart MIME":   {in: custom(AL2023, "Content-Type: text/plain\n\nhello"), want: "not multipart"},
		"unknown family":       {in: custom("Ubuntu", ""), want: "unknown AMI family"},
	} {
		_, err := Generate(tc.in())
		if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}
