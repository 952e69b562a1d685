package demo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"
)

// writeConfig writes the demo NodePool/EC2NodeClass for cluster into dir
// (the functions' NODEWRIGHT_CONFIG_DIR, as the CDK app bundles it).
func writeConfig(dir, cluster, policy string) error {
	src, err := testdata.ReadFile("testdata/default.yaml")
	if err != nil {
		return err
	}
	out := bytes.ReplaceAll(src, []byte("CLUSTER_NAME"), []byte(cluster))
	if policy != "" {
		out = bytes.Replace(out, []byte("consolidationPolicy: WhenEmpty\n"), []byte("consolidationPolicy: "+policy+"\n"), 1)
	}
	return os.WriteFile(filepath.Join(dir, "default.yaml"), out, 0o644)
}

// inflateDeployment is the inflate Deployment of infra/examples/workloads.
func inflateDeployment() (*appsv1.Deployment, error) {
	src, err := testdata.ReadFile("testdata/inflate.yaml")
	if err != nil {
		return nil, err
	}
	var d appsv1.Deployment
	if err := yaml.UnmarshalStrict(src, &d); err != nil {
		return nil, fmt.Errorf("inflate.yaml: %w", err)
	}
	return &d, nil
}
