package apis

import (
	"errors"
	"os"
	"strings"
	"testing"
)

const kubectlExport = "testdata/exported/kubectl-get.yaml"

func TestKubectlListLoads(t *testing.T) {
	cfg, err := Load(kubectlExport)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.NodePools) != 2 || len(cfg.NodeClasses) != 1 {
		t.Fatalf("loaded %d pools, %d classes", len(cfg.NodePools), len(cfg.NodeClasses))
	}
	want := kubectlExport + ":7: metadata.annotations[karpenter.sh/nodepool-hash]: ignored in 3 objects: " +
		"metadata.annotations[karpenter.k8s.aws/ec2nodeclass-hash-version], metadata.annotations[karpenter.k8s.aws/ec2nodeclass-hash], " +
		"metadata.annotations[karpenter.sh/nodepool-hash-version], metadata.annotations[karpenter.sh/nodepool-hash], " +
		"metadata.annotations[kubectl.kubernetes.io/last-applied-configuration], metadata.creationTimestamp, metadata.finalizers, " +
		"metadata.generation, metadata.managedFields, metadata.resourceVersion, metadata.uid, status " +
		"(written by the API server and controllers, not configuration)"
	if len(cfg.Warnings) != 1 || cfg.Warnings[0].String() != want {
		t.Errorf("warnings:\n%v\nwant:\n%s", cfg.Warnings, want)
	}
	batch := cfg.NodePool("batch")
	if batch.Annotations["team.example.com/owner"] != "batch" || len(batch.Annotations) != 1 {
		t.Errorf("user annotations %v", batch.Annotations)
	}
	if def := cfg.NodePool("default"); def.Annotations != nil || def.UID != "" || def.Generation != 0 {
		t.Errorf("server-set metadata kept: %+v", def.ObjectMeta)
	}
	if nc := cfg.NodeClass("default"); len(nc.Finalizers) != 0 {
		t.Errorf("finalizers kept: %v", nc.Finalizers)
	}
	if src := cfg.Sources[ObjectKey{Kind: NodePoolKind, Name: "batch"}]; src.Line != 88 {
		t.Errorf("source of batch %+v", src)
	}
}

func TestKubectlListErrorsNameTheItem(t *testing.T) {
	data, err := os.ReadFile(kubectlExport)
	if err != nil {
		t.Fatal(err)
	}
	doc := edit(string(data), "    weight: 10", "    weight: 0", "        - key: karpenter.sh/capacity-type\n          operator: In\n          values:\n          - spot",
		"        - key: karpenter.sh/capacity-type\n          operatr: In\n          values:\n          - spot")
	_, err = LoadData("export.yaml", []byte(doc))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err %v", err)
	}
	got := list.Error()
	for _, want := range []string{
		"export.yaml:115: spec.template.spec.requirements[0].operatr: unknown field (did you mean \"operator\"?)",
		"export.yaml:121: spec.weight: 0 is outside 1..100",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %q in\n%s", want, got)
		}
	}
}

func TestListShapes(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"typed list", "apiVersion: karpenter.sh/v1\nkind: NodePoolList\nitems:\n" + indentItem(pool) + "---\n" + class, ""},
		{"empty list", "apiVersion: v1\nkind: List\nitems: []\n---\n" + pool + "---\n" + class, ""},
		{"items not a list", "apiVersion: v1\nkind: List\nitems: {}\n", "x.yaml:3: items: expected a list, got an object"},
		{"list in a list", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: List\n  items: []\n", "x.yaml:4: items: a list inside a list is not supported"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadData("x.yaml", []byte(c.doc))
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// indentItem turns a document into one entry of a YAML list.
func indentItem(doc string) string {
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i, l := range lines {
		prefix := "  "
		if i == 0 {
			prefix = "- "
		}
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}
