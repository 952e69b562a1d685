package shadow

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/store"
)

// reads are the methods of the wrapped clients that only read: every other
// exported method must be one shadow declares itself, so a write added to
// kube.Client or aws.Provider fails here until shadow mode replaces it.
var reads = map[string]map[string]bool{
	"cluster.go": {"ClaimNode": true, "NodeFor": true, "PVCVolumeName": true, "Snapshot": true, "PodsOnNode": true,
		"VolumeAttachmentsOnNode": true, "FullLists": true},
	"cloud.go": {"AMIs": true, "Cluster": true, "Subnets": true, "SecurityGroups": true, "Resolve": true, "Drift": true,
		"GetInstance": true, "ListClusterInstances": true, "Owns": true, "Catalog": true, "ApplyICE": true, "Tags": true, "PoolTags": true,
		"LaunchTemplates": true, "Prices": true, "ICE": true, "InvalidateDiscovery": true, "CapacityReservations": true,
		"WithReservations": true, "PlanLaunch": true, "PlacementGroup": true, "WithPlacementGroups": true, "InvisibleLongEnough": true,
		"ImpairedInstances": true},
}

func TestEveryWriteIsReplaced(t *testing.T) {
	for file, wrapped := range map[string]reflect.Type{"cluster.go": reflect.TypeOf(&kube.Client{}), "cloud.go": reflect.TypeOf(&nwaws.Provider{})} {
		own := declaredMethods(t, file)
		for i := range wrapped.NumMethod() {
			name := wrapped.Method(i).Name
			if !reads[file][name] && !own[name] {
				t.Errorf("%s: %s.%s is not a known read and shadow does not replace it", file, wrapped, name)
			}
		}
	}
}

func declaredMethods(t *testing.T, file string) map[string]bool {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil {
			out[fn.Name.Name] = true
		}
	}
	return out
}

func TestClusterWritesNothing(t *testing.T) {
	c := &Cluster{Recorder: &Recorder{}}
	ctx := context.Background()
	if _, err := c.AddTaint(ctx, "n", corev1.Taint{}); !errors.Is(err, ErrShadow) {
		t.Errorf("AddTaint: %v", err)
	}
	if err := c.Evict(ctx, &corev1.Pod{}, kube.EvictOptions{}); !errors.Is(err, ErrShadow) {
		t.Errorf("Evict: %v", err)
	}
	if err := c.NodeEvent(ctx, &corev1.Node{}, "Normal", "R", "x"); err != nil {
		t.Errorf("NodeEvent: %v", err)
	}
	if c.Clientset() != nil {
		t.Error("the clientset is handed out")
	}
}

// A claim a pass creates lives in memory for ClaimLifetime, over the
// table's records, and never reaches the table.
func TestClaimsStayInMemory(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	c := &Claims{Now: func() time.Time { return now }}
	ctx := context.Background()
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	if err := c.CreateNodeClaim(ctx, cl); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateNodeClaim(ctx, cl); !errors.Is(err, store.ErrAlreadyExists) {
		t.Fatalf("second create: %v", err)
	}
	got, err := c.MutateNodeClaim(ctx, cl.Name, func(nc *apis.NodeClaim) error {
		nc.Status.InstanceID = ShadowInstancePrefix + nc.Name
		return nil
	})
	if err != nil || got.Status.InstanceID != "shadow-default-abc" {
		t.Fatalf("mutate: %v %v", got, err)
	}
	if g, err := c.GetNodeClaim(ctx, cl.Name); err != nil || g.Status.InstanceID != "shadow-default-abc" {
		t.Fatalf("get: %v %v", g, err)
	}
	now = now.Add(ClaimLifetime + time.Second)
	c.mu.Lock()
	_, live := c.get(cl.Name)
	c.mu.Unlock()
	if live {
		t.Fatal("the claim outlived its pass")
	}
}

type puts struct{ got []store.Decision }

func (p *puts) PutDecision(_ context.Context, d store.Decision) error {
	p.got = append(p.got, d)
	return nil
}

// The recorder joins a pass's pending pods, planned claims and nominations
// into one record, and writes nothing for a pass that planned nothing.
func TestRecorderFlush(t *testing.T) {
	now := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	w := &puts{}
	r := &Recorder{Store: w, Function: "provisioner", Now: func() time.Time { return now }}
	ctx := context.Background()
	if err := r.Flush(ctx); err != nil || len(w.got) != 0 {
		t.Fatalf("an empty pass was recorded: %v %v", w.got, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "work", Name: "big-0", CreationTimestamp: metav1.NewTime(now.Add(-90 * time.Second))}}
	r.pending(&kube.Snapshot{PendingPods: []*corev1.Pod{pod}})
	now = now.Add(2 * time.Second)
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	r.launched(cl, nwaws.Instance{Type: "m5.xlarge", Zone: "us-east-1a", CapacityType: "spot"}, 0.07)
	(&Cluster{Recorder: r}).PodEvent(ctx, pod, "Normal", reasonNominated, "Pod should schedule on: %s", "nodeclaim/default-abc (instance type m5.xlarge)")
	if err := r.Flush(ctx); err != nil || len(w.got) != 1 {
		t.Fatalf("flush: %v %v", w.got, err)
	}
	body := string(w.got[0].Body)
	for _, want := range []string{`"instanceType":"m5.xlarge"`, `"pods":["work/big-0"]`, `"decisionSeconds":2`, `"seconds":90`} {
		if !strings.Contains(body, want) {
			t.Errorf("record lacks %s: %s", want, body)
		}
	}
}

// Nodes no claim names get a made-up claim in the pool their label names,
// or the first pool their labels meet; the owner map says who launched each.
func TestForeignClaims(t *testing.T) {
	weight := int32(10)
	cfg := &apis.Config{NodePools: []*apis.NodePool{
		{ObjectMeta: metav1.ObjectMeta{Name: "general"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "arm"}, Spec: apis.NodePoolSpec{Weight: &weight, Template: apis.NodeClaimTemplate{Spec: apis.NodeClaimTemplateSpec{
			Requirements: []apis.NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64"}}}}}}},
	}}
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-" + name}}
	}
	nodes := []*corev1.Node{
		node("ours", nil),
		node("karp", map[string]string{apis.NodePoolLabelKey: "general", "kubernetes.io/arch": "arm64"}),
		node("mng", map[string]string{"kubernetes.io/arch": "amd64"}),
		node("ca-arm", map[string]string{"kubernetes.io/arch": "arm64"}),
	}
	ours := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "general-x"}}
	ours.Status.ProviderID = "aws:///us-east-1a/i-ours"
	got, owner := foreignClaims(nodes, []*apis.NodeClaim{ours}, cfg)
	pools := map[string]string{}
	for _, cl := range got {
		pools[cl.Status.NodeName] = cl.NodePoolName()
		if !cl.IsTrue(apis.ConditionInitialized) || cl.NodePoolHash == "" {
			t.Errorf("%s is not an initialized claim of its pool's hash", cl.Name)
		}
	}
	want := map[string]string{"karp": "general", "mng": "general", "ca-arm": "arm"}
	if !reflect.DeepEqual(pools, want) {
		t.Errorf("pools %v, want %v", pools, want)
	}
	if wantOwner := map[string]string{"ours": OwnerNodewright, "karp": OwnerKarpenter, "mng": OwnerOther, "ca-arm": OwnerOther}; !reflect.DeepEqual(owner, wantOwner) {
		t.Errorf("owners %v, want %v", owner, wantOwner)
	}
}
