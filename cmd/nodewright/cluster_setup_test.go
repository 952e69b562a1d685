package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/nodewright/nodewright/internal/livecluster"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// readerGroup holds the user the commands run as: it may get and list what
// `simulate --kubeconfig` and `import` read, and nothing else, so a
// mutating call would be refused and show in the audit log.
const readerGroup = "nodewright:cli-readers"

// readerRules are the rights the README says the two commands need.
var readerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods", "nodes", "namespaces", "persistentvolumes", "persistentvolumeclaims"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses", "csinodes", "volumeattachments"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"karpenter.sh"}, Resources: []string{"nodepools", "nodeclaims"}, Verbs: []string{"get", "list"}},
	{APIGroups: []string{"karpenter.k8s.aws"}, Resources: []string{"ec2nodeclasses"}, Verbs: []string{"get", "list"}},
}

// setupCluster creates the cluster's objects and returns the admin's
// dynamic client.
func setupCluster(ctx context.Context, t *testing.T, plane *kubeplane.Plane) dynamic.Interface {
	t.Helper()
	cs := plane.Client()
	dyn, err := dynamic.NewForConfig(plane.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	apply(ctx, t, dyn, "karpenter-crds.yaml")
	kubeplane.WaitFor(ctx, t, "Karpenter CRDs served", func() (bool, bool, error) {
		_, err1 := dyn.Resource(livecluster.NodePools).List(ctx, metav1.ListOptions{})
		_, err2 := dyn.Resource(livecluster.EC2NodeClasses).List(ctx, metav1.ListOptions{})
		_, err3 := dyn.Resource(livecluster.NodeClaims).List(ctx, metav1.ListOptions{})
		return true, err1 == nil && err2 == nil && err3 == nil, errors.Join(err1, err2, err3)
	})
	apply(ctx, t, dyn, "karpenter.yaml")
	grantReader(ctx, t, cs)

	node := kubeplane.FakeNode("existing", map[string]string{
		"node.kubernetes.io/instance-type": "m5.large", "topology.kubernetes.io/zone": "us-east-1a",
		"topology.kubernetes.io/region": "us-east-1", "karpenter.sh/capacity-type": "on-demand", "karpenter.sh/nodepool": "default",
	}, corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")})
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "work"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(ctx, t, cs, "small", "existing", "500m")
	createPod(ctx, t, cs, "big-0", "", "3")
	createPod(ctx, t, cs, "big-1", "", "3")
	kubeplane.WaitFor(ctx, t, "small Running and both big pods Unschedulable", func() (bool, bool, error) {
		pods, err := cs.CoreV1().Pods("work").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, false, err
		}
		done := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning || unschedulable(&p) {
				done++
			}
		}
		return true, done == 3, nil
	})
	return dyn
}

func unschedulable(p *corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable
	})
}

func createPod(ctx context.Context, t *testing.T, cs kubernetes.Interface, name, node, cpu string) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "work"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("1Gi")}}}}},
	}
	if _, err := cs.CoreV1().Pods("work").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// apply creates every object of a testdata/cluster file.
func apply(ctx context.Context, t *testing.T, dyn dynamic.Interface, file string) {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "cluster", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		gvk := u.GroupVersionKind()
		resource := map[string]string{"CustomResourceDefinition": "customresourcedefinitions", "NodePool": "nodepools",
			"EC2NodeClass": "ec2nodeclasses", "NodeClaim": "nodeclaims"}[gvk.Kind]
		gvr := schema.GroupVersionResource{Group: gvk.Group, Version: gvk.Version, Resource: resource}
		if _, err := dyn.Resource(gvr).Create(ctx, &u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, u.GetName(), err)
		}
	}
}

func grantReader(ctx context.Context, t *testing.T, cs kubernetes.Interface) {
	t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nodewright-cli-reader"}, Rules: readerRules}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "nodewright-cli-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: readerGroup}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// readerKubeconfig writes a kubeconfig whose current context points
// nowhere and whose "reader" context is the read-only user, so the tests
// also show --context is honoured.
func readerKubeconfig(t *testing.T, plane *kubeplane.Plane) string {
	t.Helper()
	rc, err := plane.UserRESTConfig("reader")
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = &clientcmdapi.Cluster{Server: plane.Endpoint, CertificateAuthorityData: plane.CAData}
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.AuthInfos["reader"] = &clientcmdapi.AuthInfo{Token: rc.BearerToken}
	cfg.Contexts["reader"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "reader"}
	cfg.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "reader"}
	cfg.CurrentContext = "nowhere"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
