// Package userdatatest writes the AL2023 user data the simulator's tests
// launch instances with, so each test states only the NodeConfig fields it
// checks rather than pasting the MIME archive around them.
package userdatatest

import (
	"encoding/base64"
	"fmt"

	"sigs.k8s.io/yaml"
)

// NodeConfig is the part of a nodeadm NodeConfig (node.eks.aws/v1alpha1)
// that the simulator reads.
type NodeConfig struct {
	Cluster string
	// Kubelet is spec.kubelet.config, e.g. {"maxPods": 29}.
	Kubelet map[string]any
	// Flags is spec.kubelet.flags, e.g. `--node-labels="a=b"`.
	Flags []string
}

// MIME is n as Karpenter writes AL2023 user data: one
// application/node.eks.aws part in a multipart/mixed archive.
func (n NodeConfig) MIME() string {
	kubelet := map[string]any{}
	if n.Kubelet != nil {
		kubelet["config"] = n.Kubelet
	}
	if n.Flags != nil {
		kubelet["flags"] = n.Flags
	}
	d := map[string]any{"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
		"spec": map[string]any{"cluster": map[string]any{"name": n.Cluster}, "kubelet": kubelet}}
	b, err := yaml.Marshal(d)
	if err != nil { // only values YAML cannot hold fail, and tests pass plain ones
		panic(fmt.Sprintf("userdatatest: marshal NodeConfig: %v", err))
	}
	return "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"//\"\n\n" +
		"--//\nContent-Type: application/node.eks.aws\n\n" + string(b) + "\n--//--\n"
}

// Base64 is MIME encoded as EC2 carries user data.
func (n NodeConfig) Base64() string {
	return base64.StdEncoding.EncodeToString([]byte(n.MIME()))
}
