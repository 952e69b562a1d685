package infra

import (
	"os"
	"path/filepath"
	"testing"
)

// TestExamplesFitTheStack checks every configuration under examples/ as
// `cdk deploy -c configDir=infra/examples/<name>` would before anything
// reaches AWS: it loads, and its node roles fit the IAM the stack creates
// (given the role of each existing instance profile a class names).
// ${CLUSTER_NAME} is filled in first, as the README's envsubst does.
func TestExamplesFitTheStack(t *testing.T) {
	dirs, err := os.ReadDir("examples")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range dirs {
		if !d.IsDir() || d.Name() == "workloads" {
			continue
		}
		checked++
		t.Run(d.Name(), func(t *testing.T) {
			files, err := ConfigFiles(filepath.Join("examples", d.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out := t.TempDir()
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				expanded := os.Expand(string(data), func(k string) string {
					if k == "CLUSTER_NAME" {
						return testCluster
					}
					return "$" + k
				})
				if err := os.WriteFile(filepath.Join(out, filepath.Base(f)), []byte(expanded), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			files, err = ConfigFiles(out)
			if err != nil {
				t.Fatal(err)
			}
			nc, err := LoadWithAPIs(files...)
			if err != nil {
				t.Fatalf("does not load: %v", err)
			}
			cfg := baseConfig(t)
			cfg.ConfigDir = out
			// A class naming an existing instance profile deploys with
			// -c instanceProfileRoles=<profile>=<its role>.
			cfg.InstanceProfileRoles = map[string]string{}
			for _, c := range nc.NodeClasses {
				if c.InstanceProfile != "" {
					cfg.InstanceProfileRoles[c.InstanceProfile] = "KarpenterNodeRole-" + testCluster
				}
			}
			if _, err := checkNodeConfig(cfg, nc); err != nil {
				t.Errorf("does not fit the stack: %v", err)
			}
		})
	}
	if checked == 0 {
		t.Fatal("no example configurations")
	}
}
