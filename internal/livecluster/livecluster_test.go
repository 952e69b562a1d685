package livecluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/livecluster"
)

// As the API server returns them: server-set metadata, Karpenter's
// finalizer and hash annotation, status.
const listedPool = `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
  uid: 0b7c1c4e-1111-2222-3333-444455556666
  resourceVersion: "4242"
  generation: 3
  creationTimestamp: "2026-01-01T00:00:00Z"
  finalizers: [karpenter.sh/termination]
  annotations:
    karpenter.sh/nodepool-hash: "123"
    team: platform
  managedFields:
  - {manager: kubectl, operation: Apply}
spec:
  replicas: 1
  template:
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
status:
  resources: {nodes: "1"}
`

const listedClass = `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
  resourceVersion: "7"
spec:
  amiSelectorTerms: [{alias: al2023@latest}]
  role: NodeRole
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: prod}}]
`

func fakeCluster(t *testing.T, docs ...string) *dynamicfake.FakeDynamicClient {
	t.Helper()
	var objs []runtime.Object
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := sigsyaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		livecluster.NodePools: "NodePoolList", livecluster.EC2NodeClasses: "EC2NodeClassList", livecluster.NodeClaims: "NodeClaimList",
	}, objs...)
}

func TestReadKarpenterStripsWhatTheServerWrote(t *testing.T) {
	objs, err := livecluster.ReadKarpenter(context.Background(), fakeCluster(t, listedClass, listedPool))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].File != "nodepool-default.yaml" || objs[1].File != "ec2nodeclass-default.yaml" ||
		objs[0].Ref != "nodepool.karpenter.sh/default" || objs[1].Ref != "ec2nodeclass.karpenter.k8s.aws/default" {
		t.Fatalf("objects %+v: want the NodePool first, then the EC2NodeClass, with their files and refs", objs)
	}
	want := `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  annotations:
    team: platform
  name: default
spec:
  replicas: 1
  template:
    spec:
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
`
	if got := string(objs[0].YAML); got != want {
		t.Fatalf("NodePool file:\n%s\nwant:\n%s", got, want)
	}
	cfg, err := livecluster.LoadObjects(objs)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing server-set is left for the loader to drop (it would warn),
	// and spec.replicas is honoured.
	if len(cfg.Warnings) != 0 {
		t.Fatalf("warnings %v, want none", cfg.Warnings)
	}
}

func TestReadKarpenterWithoutTheCRDs(t *testing.T) {
	dyn := fakeCluster(t)
	dyn.PrependReactor("list", "nodepools", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Group: "karpenter.sh", Resource: "nodepools"}, "")
	})
	_, err := livecluster.ReadKarpenter(context.Background(), dyn)
	if err == nil || !strings.Contains(err.Error(), "does not serve nodepools.karpenter.sh/v1 (are Karpenter's CRDs installed?)") {
		t.Fatalf("ReadKarpenter without the CRDs: %v", err)
	}
	if objs, err := livecluster.ReadKarpenter(context.Background(), fakeCluster(t)); err != nil || len(objs) != 0 {
		t.Fatalf("ReadKarpenter of an empty cluster = %v, %v; want nothing", objs, err)
	}
}

func TestWriteRefusesToOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	objs := []livecluster.Object{{File: "nodepool-a.yaml", YAML: []byte("a: 1\n")}, {File: "nodepool-b.yaml", YAML: []byte("b: 1\n")}}
	paths, err := livecluster.Write(dir, objs, false)
	if err != nil || len(paths) != 2 {
		t.Fatalf("Write = %v, %v", paths, err)
	}
	if err := os.WriteFile(paths[0], []byte("mine\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(paths[1]); err != nil {
		t.Fatal(err)
	}
	// One file exists: nothing is written, not even the missing one.
	if _, err := livecluster.Write(dir, objs, false); err == nil || !strings.Contains(err.Error(), "refusing to overwrite "+paths[0]) {
		t.Fatalf("Write over an existing file: %v", err)
	}
	if _, err := os.Stat(paths[1]); !os.IsNotExist(err) {
		t.Fatalf("a refused Write wrote %s (%v)", paths[1], err)
	}
	if _, err := livecluster.Write(dir, objs, true); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(paths[0]); string(got) != "a: 1\n" {
		t.Fatalf("--force left %q", got)
	}
}

// Karpenter's NodeClaims decode as nodewright's; one that does not, or a
// user who may not list them, costs a warning, never the plan.
func TestReadNodeClaims(t *testing.T) {
	claim := `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-abc, labels: {karpenter.sh/nodepool: default}}
spec:
  requirements: [{key: karpenter.sh/nodepool, operator: In, values: [default]}]
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  expireAfter: Never
status: {providerID: "aws:///us-east-1a/i-1", allocatable: {cpu: 3920m}}
`
	broken := `
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-bad}
spec: {expireAfter: soon}
`
	claims, warnings, err := livecluster.ReadNodeClaims(context.Background(), fakeCluster(t, claim, broken))
	if err != nil || len(claims) != 1 || claims[0].Name != "default-abc" || claims[0].NodePoolName() != "default" ||
		claims[0].Status.ProviderID != "aws:///us-east-1a/i-1" || len(warnings) != 1 || !strings.Contains(warnings[0], "NodeClaim default-bad not counted") {
		t.Fatalf("ReadNodeClaims = %+v, %v, %v", claims, warnings, err)
	}
	dyn := fakeCluster(t, claim)
	dyn.PrependReactor("list", "nodeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "karpenter.sh", Resource: "nodeclaims"}, "", nil)
	})
	if claims, warnings, err := livecluster.ReadNodeClaims(context.Background(), dyn); err != nil || len(claims) != 0 || len(warnings) != 1 {
		t.Fatalf("forbidden: %v, %v, %v; want no claims and one warning", claims, warnings, err)
	}
}
