package workload

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds arbitrary manifests to the reader behind `nodewright
// simulate`. Properties: no panic; a failure is an error naming the input;
// the expansion is bounded (a tiny limit here, so a replicas count cannot
// make one input take gigabytes); pending pods are unbound and bound pods
// sit on their node.
//
//	go test -run '^$' -fuzz '^FuzzParse$' -fuzztime 60s ./internal/workload
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1000000, selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: x}]}}}\n"))
	f.Add([]byte("a: &a [*a, *a]\nb: &b [*a, *a]\n"))
	const limit = 1000
	f.Fuzz(func(t *testing.T, data []byte) {
		w, err := parseSources(limit, Source{Name: "fuzz.yaml", Reader: bytes.NewReader(data)})
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the input: %v", err)
			}
			return
		}
		if len(w.Pods) > limit {
			t.Fatalf("%d pods past the limit %d", len(w.Pods), limit)
		}
		for _, p := range w.Pods {
			if p.Spec.NodeName != "" {
				t.Fatalf("pending pod %s/%s is bound to %s", p.Namespace, p.Name, p.Spec.NodeName)
			}
		}
		for _, n := range w.Nodes {
			for _, p := range n.Pods {
				if p.Spec.NodeName != n.Node.Name {
					t.Fatalf("pod %s/%s on node %s says %s", p.Namespace, p.Name, n.Node.Name, p.Spec.NodeName)
				}
			}
		}
	})
}
