package userdata

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// nodeConfig mirrors the fields of nodeadm's NodeConfig (node.eks.aws/v1alpha1)
// that nodewright sets; field names follow nodeadm's API.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster  nodeConfigCluster   `json:"cluster"`
	Kubelet  nodeConfigKubelet   `json:"kubelet"`
	Instance *nodeConfigInstance `json:"instance,omitempty"`
}

type nodeConfigCluster struct {
	Name                 string `json:"name"`
	APIServerEndpoint    string `json:"apiServerEndpoint"`
	CertificateAuthority string `json:"certificateAuthority"`
	CIDR                 string `json:"cidr"`
}

type nodeConfigKubelet struct {
	Config map[string]any `json:"config,omitempty"`
	Flags  []string       `json:"flags,omitempty"`
}

type nodeConfigInstance struct {
	LocalStorage struct {
		Strategy string `json:"strategy"`
	} `json:"localStorage"`
}

// nodeadm renders AL2023 user data: the EC2NodeClass's parts first, then
// nodewright's NodeConfig, which nodeadm merges last so it wins on conflicts.
func nodeadm(o Options) (string, error) {
	parts, err := customParts(o.Custom, true)
	if err != nil {
		return "", fmt.Errorf("AL2023 user data: %w", err)
	}
	nc, err := o.nodeConfigYAML()
	if err != nil {
		return "", fmt.Errorf("AL2023 user data: %w", err)
	}
	parts = append(parts, Part{ContentType: ContentTypeNodeConfig, Content: nc})
	return SerializeMIME(parts)
}

func (o Options) nodeConfigYAML() (string, error) {
	nc := nodeConfig{
		APIVersion: "node.eks.aws/v1alpha1",
		Kind:       "NodeConfig",
		Spec: nodeConfigSpec{
			Cluster: nodeConfigCluster{
				Name:                 o.ClusterName,
				APIServerEndpoint:    o.ClusterEndpoint,
				CertificateAuthority: o.CABundle,
				CIDR:                 o.ServiceCIDR,
			},
			Kubelet: nodeConfigKubelet{Config: o.inlineKubeletConfig()},
		},
	}
	if len(o.Labels) > 0 {
		nc.Spec.Kubelet.Flags = []string{"--node-labels=" + labelList(o.Labels)}
	}
	if o.InstanceStorePolicy == "RAID0" {
		nc.Spec.Instance = &nodeConfigInstance{}
		nc.Spec.Instance.LocalStorage.Strategy = "RAID0"
	}
	b, err := yaml.Marshal(nc)
	if err != nil {
		return "", fmt.Errorf("marshal NodeConfig: %w", err)
	}
	return "# nodewright generated NodeConfig\n" + string(b), nil
}

// inlineKubeletConfig is a KubeletConfiguration fragment (kubelet.config.k8s.io
// field names) that nodeadm merges over the AMI's defaults.
func (o Options) inlineKubeletConfig() map[string]any {
	k := o.Kubelet
	c := map[string]any{}
	if len(k.ClusterDNS) > 0 {
		c["clusterDNS"] = k.ClusterDNS
	}
	setPtr(c, "maxPods", k.MaxPods)
	setPtr(c, "podsPerCore", k.PodsPerCore)
	setMap(c, "systemReserved", k.SystemReserved)
	setMap(c, "kubeReserved", k.KubeReserved)
	setMap(c, "evictionHard", k.EvictionHard)
	setMap(c, "evictionSoft", k.EvictionSoft)
	if len(k.EvictionSoftGracePeriod) > 0 {
		c["evictionSoftGracePeriod"] = durations(k.EvictionSoftGracePeriod)
	}
	setPtr(c, "evictionMaxPodGracePeriod", k.EvictionMaxPodGracePeriod)
	setPtr(c, "imageGCHighThresholdPercent", k.ImageGCHighThresholdPercent)
	setPtr(c, "imageGCLowThresholdPercent", k.ImageGCLowThresholdPercent)
	setPtr(c, "cpuCFSQuota", k.CPUCFSQuota)
	// Always set, even empty: an empty list overrides any taints an AMI default
	// might register, and the key's presence makes intent explicit.
	taints := o.Taints
	if taints == nil {
		taints = []corev1.Taint{}
	}
	c["registerWithTaints"] = taintsJSON(taints)
	return c
}

// taintsJSON converts taints to plain values so YAML output omits Go zero
// fields (timeAdded) exactly as the Kubernetes JSON encoding does.
func taintsJSON(taints []corev1.Taint) []any {
	b, _ := json.Marshal(taints) // a []corev1.Taint always marshals
	var out []any
	_ = json.Unmarshal(b, &out)
	return out
}

// customParts turns the EC2NodeClass's user data into MIME parts. A MIME
// document is split as is; otherwise a YAML mapping becomes a NodeConfig part
// (when yamlIsNodeConfig) and anything else a shell script part.
func customParts(custom string, yamlIsNodeConfig bool) ([]Part, error) {
	if custom == "" {
		return nil, nil
	}
	if isMIME(custom) {
		parts, err := ParseMIME(custom)
		if err != nil {
			return nil, fmt.Errorf("EC2NodeClass userData: %w", err)
		}
		return parts, nil
	}
	if yamlIsNodeConfig {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(custom), &m); err == nil && len(m) > 0 {
			return []Part{{ContentType: ContentTypeNodeConfig, Content: custom}}, nil
		}
	}
	return []Part{{ContentType: ContentTypeShell, Content: custom}}, nil
}
