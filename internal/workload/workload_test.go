package workload

import (
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func names(pods []*corev1.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	return strings.Join(out, ",")
}

// controllerYAML is a document of an apps/v1 controller of the given kind
// and name whose selector and one-container pod template use app=name; spec
// holds its other spec lines, indented, each ending in a newline.
func controllerYAML(kind, name, spec string) string {
	return "apiVersion: apps/v1\nkind: " + kind + "\nmetadata: {name: " + name + "}\nspec:\n" + spec +
		"  selector: {matchLabels: {app: " + name + "}}\n" +
		"  template: {metadata: {labels: {app: " + name + "}}, spec: {containers: [{name: c, image: x}]}}\n"
}

func TestParseMixed(t *testing.T) {
	w, err := ParseFiles(filepath.Join("testdata", "mixed.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	want := "default/inflate-0,default/inflate-1,default/inflate-2,data/db-0,data/db-1,default/crunch-0,default/crunch-1,default/solo"
	if got := names(w.Pods); got != want {
		t.Fatalf("pods = %s\nwant   %s", got, want)
	}
	inflate := w.Pods[0]
	if inflate.Labels["app"] != "inflate" || inflate.Labels[appsv1.DefaultDeploymentUniqueLabelKey] == "" {
		t.Errorf("deployment pod labels = %v", inflate.Labels)
	}
	if c := inflate.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; c.Cmp(resource.MustParse("1")) != 0 {
		t.Errorf("cpu request = %s", c.String())
	}
	if inflate.UID == "" || inflate.UID == w.Pods[1].UID || !inflate.CreationTimestamp.Before(&w.Pods[1].CreationTimestamp) {
		t.Errorf("pods need distinct UIDs and file-ordered creation times: %s %s %v %v", inflate.UID, w.Pods[1].UID, inflate.CreationTimestamp, w.Pods[1].CreationTimestamp)
	}
	if o := inflate.OwnerReferences; len(o) != 1 || o[0].Kind != "Deployment" || o[0].Name != "inflate" {
		t.Errorf("owner = %+v", o)
	}
	// StatefulSet pods get their own claims from volumeClaimTemplates.
	db1 := w.Pods[4]
	if db1.Labels[appsv1.StatefulSetPodNameLabel] != "db-1" || db1.Spec.Hostname != "db-1" {
		t.Errorf("statefulset pod = %+v", db1.ObjectMeta)
	}
	if len(db1.Spec.Volumes) != 1 || db1.Spec.Volumes[0].PersistentVolumeClaim == nil || db1.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "pgdata-db-1" {
		t.Errorf("db-1 volumes = %+v", db1.Spec.Volumes)
	}
	if len(w.PersistentVolumeClaims) != 2 || w.PersistentVolumeClaims[1].Name != "pgdata-db-1" || w.PersistentVolumeClaims[1].Namespace != "data" {
		t.Errorf("claims = %+v", w.PersistentVolumeClaims)
	}
	// Job: min(parallelism 4, completions 2) pods, with job-name labels.
	if w.Pods[5].Labels["job-name"] != "crunch" {
		t.Errorf("job pod labels = %v", w.Pods[5].Labels)
	}
	if len(w.DaemonSets) != 1 || w.DaemonSets[0].Name != "logs" || w.DaemonSets[0].Namespace != "kube-system" {
		t.Errorf("daemonsets = %+v", w.DaemonSets)
	}
	if len(w.StorageClasses) != 1 {
		t.Errorf("storage classes = %d", len(w.StorageClasses))
	}
	if len(w.Warnings) != 1 || !strings.Contains(w.Warnings[0], "Service inflate ignored") || !strings.Contains(w.Warnings[0], "mixed.yaml:23") {
		t.Errorf("warnings = %q", w.Warnings)
	}
}

func TestParseClusterExport(t *testing.T) {
	w, err := ParseFiles(filepath.Join("testdata", "cluster.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Nodes) != 1 || w.Nodes[0].Node.Name != "ip-10-0-1-10.ec2.internal" {
		t.Fatalf("nodes = %+v", w.Nodes)
	}
	if got := names(w.Nodes[0].Pods); got != "shop/web-abc,kube-system/aws-node-x7k2p" {
		t.Errorf("bound pods = %s", got)
	}
	if got := names(w.Pods); got != "shop/waiting" {
		t.Errorf("pending pods = %s", got)
	}
	// The export has daemon pods, not DaemonSets: the DaemonSet is inferred,
	// without the node pin the DaemonSet controller adds to each pod.
	if len(w.DaemonSets) != 1 || w.DaemonSets[0].Namespace != "kube-system" || w.DaemonSets[0].Name != "aws-node" {
		t.Fatalf("daemonsets = %+v", w.DaemonSets)
	}
	ds := w.DaemonSets[0].Spec.Template.Spec
	terms := ds.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	if ds.NodeName != "" || len(terms) != 1 || len(terms[0].MatchFields) != 0 || terms[0].MatchExpressions[0].Key != "kubernetes.io/os" {
		t.Errorf("inferred daemonset spec = %+v", ds)
	}
	if len(w.Nodes[0].Pods[1].Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields) != 1 {
		t.Error("inferring the DaemonSet changed the bound pod")
	}
	joined := strings.Join(w.Warnings, "\n")
	for _, want := range []string{"shop/done is Succeeded", `bound to node "gone"`, "DaemonSet kube-system/aws-node inferred"} {
		if !strings.Contains(joined, want) {
			t.Errorf("warnings lack %q:\n%s", want, joined)
		}
	}
}

func TestParseWorkloadAndNodesTogether(t *testing.T) {
	w, err := ParseSources(
		Source{"pods.yaml", strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: a}\nspec: {nodeName: n1, containers: [{name: c, image: x}]}\n")},
		Source{"nodes.yaml", strings.NewReader("apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n")},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Nodes) != 1 || len(w.Nodes[0].Pods) != 1 || len(w.Warnings) != 0 {
		t.Fatalf("a pod bound to a node from another file must attach: %+v %q", w.Nodes, w.Warnings)
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct{ doc, want string }{
		"selector mismatch": {`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: other}}
    spec: {containers: [{name: c, image: x}]}
`, "in.yaml:1: Deployment default/web: spec.selector app=web does not match the template labels"},
		"negative replicas": {controllerYAML("ReplicaSet", "web", "  replicas: -1\n"), "spec.replicas -1 is out of range"},
		"no containers":     {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n", "Pod default/p: pod template has no containers"},
		"old api version":   {"apiVersion: extensions/v1beta1\nkind: Deployment\nmetadata: {name: d}\n", `Deployment: apiVersion "extensions/v1beta1" is not supported (want apps/v1)`},
		"no kind":           {"apiVersion: v1\nmetadata: {name: p}\n", "document has no kind"},
		"bad quantity": {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x, resources: {requests: {cpu: lots}}}]}\n",
			"in.yaml:1: Pod:"},
		"duplicate": {"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n",
			"in.yaml:6: Pod default/p is defined twice (first at in.yaml:1)"},
		"bad yaml":   {"kind: [\n", "in.yaml"},
		"not object": {"- a\n- b\n", "in.yaml:1: document is not an object"},
	}
	for name, tc := range cases {
		_, err := Parse(strings.NewReader(tc.doc), "in.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, tc.want)
		}
	}
}

func TestDefaultsAndEdgeCases(t *testing.T) {
	w, err := Parse(strings.NewReader(controllerYAML("Deployment", "one", "")+"---\n"+
		controllerYAML("Deployment", "zero", "  replicas: 0\n")+`---
apiVersion: batch/v1
kind: Job
metadata: {name: paused}
spec:
  suspend: true
  template: {spec: {containers: [{name: c, image: x}]}}
---
apiVersion: v1
kind: Pod
metadata:
  name: ds-pod
  ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: logs, uid: u, controller: true}]
spec: {containers: [{name: c, image: x}]}
`), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := names(w.Pods); got != "default/one-0" {
		t.Errorf("pods = %s (replicas defaults to 1; 0 replicas, suspended jobs and daemon pods add none)", got)
	}
	if len(w.Warnings) != 3 || len(w.DaemonSets) != 1 || w.DaemonSets[0].Name != "logs" {
		t.Errorf("warnings = %q, daemonsets %v", w.Warnings, w.DaemonSets)
	}
	// Equal input gives equal pods.
	w2, _ := Parse(strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: one-0}\nspec: {containers: [{name: c, image: x}]}\n"), "x")
	if w2.Pods[0].UID != w.Pods[0].UID {
		t.Errorf("UIDs are not derived from namespace/name")
	}
}

func TestSchedulingGatedPodsAreNotPending(t *testing.T) {
	w, err := Parse(strings.NewReader("apiVersion: v1\nkind: Pod\nmetadata: {name: gated}\nspec:\n  schedulingGates: [{name: example.com/wait}]\n  containers: [{name: c, image: x}]\n"), "in.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Pods) != 0 || len(w.Warnings) != 1 || !strings.Contains(w.Warnings[0], "scheduling gates") {
		t.Errorf("pods %d, warnings %q", len(w.Pods), w.Warnings)
	}
}

// Controllers each within MaxReplicas must not add up to an unbounded
// input: a few lines of YAML would otherwise take gigabytes.
func TestTotalPodsAreBounded(t *testing.T) {
	doc := controllerYAML("Deployment", "a", "  replicas: 3\n") + `---
apiVersion: batch/v1
kind: Job
metadata: {name: b}
spec:
  parallelism: 3
  template: {spec: {containers: [{name: c, image: x}], restartPolicy: Never}}
`
	_, err := parseSources(5, Source{Name: "in.yaml", Reader: strings.NewReader(doc)})
	if err == nil || !strings.Contains(err.Error(), "in.yaml:9: Job default/b: 3 more pods and claims would take the input past 5") {
		t.Fatalf("err = %v", err)
	}
	if w, err := parseSources(6, Source{Name: "in.yaml", Reader: strings.NewReader(doc)}); err != nil || len(w.Pods) != 6 {
		t.Fatalf("at the limit: %v", err)
	}
	// A StatefulSet's claims count too: 2 replicas x (1 pod + 3 claims).
	sts := controllerYAML("StatefulSet", "db", "  replicas: 2\n  volumeClaimTemplates: [{metadata: {name: a}}, {metadata: {name: b}}, {metadata: {name: c}}]\n")
	if _, err := parseSources(7, Source{Name: "sts.yaml", Reader: strings.NewReader(sts)}); err == nil || !strings.Contains(err.Error(), "8 more pods and claims") {
		t.Fatalf("StatefulSet claims: err = %v", err)
	}
}
