package userdata

import (
	"bytes"
	"fmt"

	"github.com/BurntSushi/toml"
)

// bottlerocket renders Bottlerocket TOML: the EC2NodeClass's settings, with the
// cluster connection, labels, taints and kubelet settings nodewright manages
// written over them (as Karpenter does: the NodePool is the source of truth
// for labels and taints the scheduler relies on).
func bottlerocket(o Options) (string, error) {
	doc := map[string]any{}
	if o.Custom != "" {
		if _, err := toml.Decode(o.Custom, &doc); err != nil {
			return "", fmt.Errorf("bottlerocket user data: EC2NodeClass userData is not valid TOML: %w", err)
		}
	}
	settings, err := subTable(doc, "settings")
	if err != nil {
		return "", err
	}
	if err := bottlerocketKubernetes(settings, o); err != nil {
		return "", err
	}
	if o.InstanceStorePolicy == "RAID0" {
		cmds, err := subTable(settings, "bootstrap-commands")
		if err != nil {
			return "", err
		}
		cmds["000-mount-instance-storage"] = map[string]any{
			"commands": [][]string{
				{"apiclient", "ephemeral-storage", "init"},
				{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"},
			},
			"mode":      "always",
			"essential": true,
		}
	}

	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(doc); err != nil {
		return "", fmt.Errorf("bottlerocket user data: encode TOML: %w", err)
	}
	return buf.String(), nil
}

// bottlerocketKubernetes writes settings.kubernetes: the cluster
// connection, labels, taints and kubelet settings.
func bottlerocketKubernetes(settings map[string]any, o Options) error {
	k8s, err := subTable(settings, "kubernetes")
	if err != nil {
		return err
	}
	k8s["cluster-name"] = o.ClusterName
	k8s["api-server"] = o.ClusterEndpoint
	k8s["cluster-certificate"] = o.CABundle
	k := o.Kubelet
	if len(k.ClusterDNS) > 0 {
		k8s["cluster-dns-ip"] = k.ClusterDNS[0]
	}

	labels, err := subTable(k8s, "node-labels")
	if err != nil {
		return err
	}
	for key, v := range o.Labels {
		labels[key] = v
	}
	if len(labels) == 0 {
		delete(k8s, "node-labels")
	}
	taints := map[string][]string{}
	for _, t := range o.Taints {
		taints[t.Key] = append(taints[t.Key], fmt.Sprintf("%s:%s", t.Value, t.Effect))
	}
	if len(taints) > 0 {
		k8s["node-taints"] = taints
	} else {
		delete(k8s, "node-taints")
	}

	setPtr(k8s, "max-pods", k.MaxPods)
	setMap(k8s, "kube-reserved", k.KubeReserved)
	setMap(k8s, "system-reserved", k.SystemReserved)
	setMap(k8s, "eviction-hard", k.EvictionHard)
	setPtr(k8s, "image-gc-high-threshold-percent", k.ImageGCHighThresholdPercent)
	setPtr(k8s, "image-gc-low-threshold-percent", k.ImageGCLowThresholdPercent)
	setPtr(k8s, "cpu-cfs-quota-enforced", k.CPUCFSQuota)
	// podsPerCore and evictionSoft have no Bottlerocket setting; Karpenter ignores them too.
	return nil
}

// subTable returns m[key] as a table, creating it when absent.
func subTable(m map[string]any, key string) (map[string]any, error) {
	v, ok := m[key]
	if !ok {
		t := map[string]any{}
		m[key] = t
		return t, nil
	}
	t, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("bottlerocket user data: %q must be a TOML table, got %T", key, v)
	}
	return t, nil
}
