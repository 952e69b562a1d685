package userdata

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

const al2023 = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: test
    apiServerEndpoint: https://example
  kubelet:
    config:
      maxPods: 58
      kubeReserved:
        cpu: 80m
        memory: 893Mi
      evictionHard:
        memory.available: 100Mi
    flags:
    - --node-labels="karpenter.sh/nodepool=default,team=a"
    - --register-with-taints="karpenter.sh/unregistered:NoExecute,gpu=true:NoSchedule"

--//--
`

const al2 = `MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="BOUNDARY"

--BOUNDARY
Content-Type: text/x-shellscript; charset="us-ascii"

#!/bin/bash -xe
exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1
/etc/eks/bootstrap.sh 'test' --apiserver-endpoint 'https://example' --b64-cluster-ca 'abc' \
--use-max-pods false \
--kubelet-extra-args '--node-labels="karpenter.sh/nodepool=default" --register-with-taints="karpenter.sh/unregistered:NoExecute" --max-pods=29 --kube-reserved=cpu=70m,memory=574Mi --eviction-hard=memory.available<100Mi'
--BOUNDARY--
`

const bottlerocket = `[settings]
[settings.kubernetes]
api-server = "https://example"
cluster-name = "test"
max-pods = 110 # comment

[settings.kubernetes.node-labels]
"karpenter.sh/nodepool" = "default"

[settings.kubernetes.node-taints]
"karpenter.sh/unregistered" = [":NoExecute"]
"dedicated" = ["gpu:NoSchedule"]

[settings.kubernetes.kube-reserved]
cpu = "80m"
`

// windows is Karpenter-AWS's Windows user data (bootstrap/windows.go
// Script): the class's PowerShell, then the Start-EKSBootstrap.ps1 call.
const windows = `<powershell>
New-Item -Path 'C:\temp\' -ItemType Directory
[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"
& $EKSBootstrapScriptFile -EKSClusterName 'test' -APIServerEndpoint 'https://example' -Base64ClusterCA 'abc' -KubeletExtraArgs '--node-labels="karpenter.sh/nodepool=windows,team=it''s" --register-with-taints="karpenter.sh/unregistered:NoExecute,os=windows:NoSchedule" --max-pods=110 --kube-reserved="cpu=80m"' -DNSClusterIP '10.100.0.10'
</powershell>`

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want Bootstrap
	}{
		{"al2023", al2023, Bootstrap{Format: FormatAL2023, ClusterName: "test", MaxPods: 58,
			Labels:       map[string]string{"karpenter.sh/nodepool": "default", "team": "a"},
			Taints:       []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: "NoExecute"}, {Key: "gpu", Value: "true", Effect: "NoSchedule"}},
			KubeReserved: map[string]string{"cpu": "80m", "memory": "893Mi"}, SystemReserved: map[string]string{}, EvictionHard: map[string]string{"memory.available": "100Mi"}}},
		{"al2", al2, Bootstrap{Format: FormatAL2, ClusterName: "test", MaxPods: 29,
			Labels:       map[string]string{"karpenter.sh/nodepool": "default"},
			Taints:       []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: "NoExecute"}},
			KubeReserved: map[string]string{"cpu": "70m", "memory": "574Mi"}, SystemReserved: map[string]string{}, EvictionHard: map[string]string{"memory.available": "100Mi"}}},
		{"bottlerocket", bottlerocket, Bootstrap{Format: FormatBottlerocket, ClusterName: "test", MaxPods: 110,
			Labels:       map[string]string{"karpenter.sh/nodepool": "default"},
			Taints:       []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: "NoExecute"}, {Key: "dedicated", Value: "gpu", Effect: "NoSchedule"}},
			KubeReserved: map[string]string{"cpu": "80m"}, SystemReserved: map[string]string{}, EvictionHard: map[string]string{}}},
		{"windows", windows, Bootstrap{Format: FormatWindows, ClusterName: "test", MaxPods: 110,
			Labels:       map[string]string{"karpenter.sh/nodepool": "windows", "team": "it's"},
			Taints:       []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: "NoExecute"}, {Key: "os", Value: "windows", Effect: "NoSchedule"}},
			KubeReserved: map[string]string{"cpu": "80m"}, SystemReserved: map[string]string{}, EvictionHard: map[string]string{}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tc.want) {
				t.Fatalf("got  %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	for name, doc := range map[string]string{
		"bad taint effect":     "[settings.kubernetes.node-taints]\n\"a\" = [\"b:Sometimes\"]\n",
		"bad max pods":         "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: lots\n",
		"unterminated":         "/etc/eks/bootstrap.sh c --kubelet-extra-args '--max-pods=3\n",
		"windows unterminated": "<powershell>\n& $EKSBootstrapScriptFile -EKSClusterName 'c' -KubeletExtraArgs '--max-pods=3\n# Start-EKSBootstrap.ps1\n</powershell>",
	} {
		if _, err := Parse(doc); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
