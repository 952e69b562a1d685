package kube_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// The local cloud for this package (the harness's): the AWS simulator (STS,
// EKS, the TokenReview webhook) and a real control plane that authenticates
// EKS tokens through it. Started by the first integration test, so unit
// tests and benchmarks start nothing.
var shared = localcloud.NewShared(localcloud.Options{
	Components:  localcloud.ControlPlane | localcloud.AWS,
	ClusterName: clusterName,
})

const clusterName = "kube-it"

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }

func setup(t *testing.T) (context.Context, *kube.Client, kubernetes.Interface, string) {
	t.Helper()
	lc := shared.Get(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	// The client under test connects the way a function does: EKS
	// DescribeCluster, an STS token, protobuf, with the controllers'
	// credentials and so their RBAC rights. Fixtures use the admin client.
	// Explicit region and static credentials: nothing consults IMDS.
	awsCfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion("us-west-2"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(localcloud.ControllerAccessKeyID, localcloud.ControllerSecretAccessKey, "")),
		config.WithBaseEndpoint(lc.AWSEndpoint),
	)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.ForEKS(ctx, awsCfg, eks.NewFromConfig(awsCfg), clusterName, kube.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, c, lc.KubeClient, lc.NewNamespace(t)
}

// fakeNode registers a KWOK node and removes it when the test ends.
func fakeNode(t *testing.T, ctx context.Context, cs kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Create(ctx, kubeplane.FakeNode(name, nil, nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return n
}

func runningPod(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name, node string, labels map[string]string) *corev1.Pod {
	t.Helper()
	grace := int64(0)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
		},
	}
	p, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		t.Fatalf("pod %s/%s not Running: %v (phase %s)", ns, name, err, p.Status.Phase)
	}
	return p
}

func TestNodeOperationsAndEvents(t *testing.T) {
	ctx, c, cs, _ := setup(t)
	name := "ops-" + fmt.Sprint(time.Now().UnixNano()%100000)
	node := fakeNode(t, ctx, cs, name)

	n, err := c.PatchNodeLabels(ctx, name, map[string]string{"karpenter.sh/nodepool": "default", "karpenter.sh/registered": "true"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["karpenter.sh/nodepool"] != "default" || n.Labels["type"] != "kwok" {
		t.Fatalf("labels after patch %v", n.Labels)
	}
	n, err = c.PatchNodeLabels(ctx, name, nil, []string{"karpenter.sh/registered"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n.Labels["karpenter.sh/registered"]; ok || n.Labels["karpenter.sh/nodepool"] != "default" {
		t.Fatalf("labels after removal %v", n.Labels)
	}

	n, err = c.PatchNodeAnnotations(ctx, name, map[string]string{"karpenter.sh/nodepool-hash": "123"}, []string{"kwok.x-k8s.io/absent"})
	if err != nil {
		t.Fatal(err)
	}
	if n.Annotations["karpenter.sh/nodepool-hash"] != "123" || n.Annotations["kwok.x-k8s.io/node"] != "fake" {
		t.Fatalf("annotations after patch %v", n.Annotations)
	}

	disrupted := corev1.Taint{Key: "karpenter.sh/disrupted", Effect: corev1.TaintEffectNoSchedule}
	if _, err := c.AddTaint(ctx, name, corev1.Taint{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddTaint(ctx, name, disrupted); err != nil {
		t.Fatal(err)
	}
	n, err = c.AddTaint(ctx, name, disrupted) // idempotent
	if err != nil {
		t.Fatal(err)
	}
	if countTaint(n, disrupted.Key) != 1 || countTaint(n, "karpenter.sh/unregistered") != 1 {
		t.Fatalf("taints %v", n.Spec.Taints)
	}
	n, err = c.RemoveTaints(ctx, name, "karpenter.sh/unregistered", "")
	if err != nil {
		t.Fatal(err)
	}
	if countTaint(n, "karpenter.sh/unregistered") != 0 || countTaint(n, disrupted.Key) != 1 {
		t.Fatalf("taints after removal %v", n.Spec.Taints)
	}

	if n, err = c.Cordon(ctx, name); err != nil || !n.Spec.Unschedulable {
		t.Fatalf("cordon: %v unschedulable=%v", err, n != nil && n.Spec.Unschedulable)
	}
	if n, err = c.Uncordon(ctx, name); err != nil || n.Spec.Unschedulable {
		t.Fatalf("uncordon: %v", err)
	}
	if _, err := c.Cordon(ctx, "no-such-node"); !errors.Is(err, kube.ErrNotFound) {
		t.Fatalf("cordon missing node: want ErrNotFound, got %v", err)
	}

	// Events as kubectl describe node finds them: by kind, name and UID.
	msg := "Consolidating: delete node, saves $0.096/h"
	for range 3 {
		if err := c.NodeEvent(ctx, node, kube.EventNormal, "DisruptionBlocked", "%s", msg); err != nil {
			t.Fatal(err)
		}
	}
	sel := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": name, "involvedObject.uid": string(node.UID)}.AsSelector().String()
	evs, err := cs.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	// The controller-manager writes its own events on the node (e.g.
	// RegisteredNode) whenever it gets to it: only nodewright's count here.
	var ours []corev1.Event
	for _, e := range evs.Items {
		if e.Source.Component == kube.Component || e.ReportingController == kube.Component {
			ours = append(ours, e)
		}
	}
	if len(ours) != 1 {
		t.Fatalf("%d nodewright events for node (of %d), want 1 aggregated: %+v", len(ours), len(evs.Items), evs.Items)
	}
	ev := ours[0]
	if ev.Reason != "DisruptionBlocked" || ev.Message != msg || ev.Source.Component != "nodewright" || ev.Count != 3 || ev.Type != "Normal" {
		t.Fatalf("event %+v", ev)
	}
	if err := c.Event(ctx, kube.NodeRef(node), "Bogus", "R", "m"); err == nil {
		t.Fatal("event type Bogus accepted")
	}

	if err := c.DeleteNode(ctx, name, "not-the-uid"); err == nil {
		t.Fatal("delete with a wrong UID precondition succeeded")
	}
	if err := c.DeleteNode(ctx, name, node.UID); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteNode(ctx, name, ""); err != nil {
		t.Fatalf("deleting a deleted node: %v", err)
	}
}

func countTaint(n *corev1.Node, key string) int {
	c := 0
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			c++
		}
	}
	return c
}

// A PDB allowing no disruption makes the API server answer 429; Evict must
// return ErrPDBBlocked at once instead of client-go's ~100 s of retries.
func TestEvictionBlockedByPDBReturnsFast(t *testing.T) {
	ctx, c, cs, ns := setup(t)
	node := fakeNode(t, ctx, cs, "evict-"+ns)
	labels := map[string]string{"app": "guarded"}
	pod := runningPod(t, ctx, cs, ns, "guarded-0", node.Name, labels)
	pod.Spec.NodeName = node.Name
	_ = c.PodEvent(ctx, pod, kube.EventNormal, "Nominated", "Pod should schedule on: nodeclaim/default-abc12")

	// minAvailable (an integer) rather than maxUnavailable: the disruption
	// controller computes maxUnavailable from the owner's scale, and these
	// test pods have no owner.
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "guard", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPDB(t, ctx, cs, ns, "guard", 0)

	start := time.Now()
	err := c.Evict(ctx, pod, kube.EvictOptions{})
	took := time.Since(start)
	if !errors.Is(err, kube.ErrPDBBlocked) {
		t.Fatalf("want ErrPDBBlocked, got %v", err)
	}
	t.Logf("PDB-blocked eviction returned in %v: %v", took, err)
	if took > 5*time.Second {
		t.Fatalf("PDB-blocked eviction took %v; client-side retries are not disabled", took)
	}

	// Allow one disruption: the eviction goes through and the pod goes away.
	zero := intstr.FromInt32(0)
	cur, err := cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "guard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Spec.MinAvailable = &zero
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPDB(t, ctx, cs, ns, "guard", 1)
	if err := c.Evict(ctx, pod, kube.EvictOptions{}); err != nil {
		t.Fatalf("evict with budget: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err != nil || p.DeletionTimestamp != nil, nil
	})
	if err != nil {
		t.Fatalf("evicted pod not terminating: %v", err)
	}
	// Evicting a pod that is gone counts as done.
	gone := pod.DeepCopy()
	gone.Name = "never-existed"
	if err := c.Evict(ctx, gone, kube.EvictOptions{}); err != nil {
		t.Fatalf("evict missing pod: %v", err)
	}

	// The Nominated event is on the pod, as kubectl describe pod shows it.
	sel := fields.Set{"involvedObject.kind": "Pod", "involvedObject.name": pod.Name, "involvedObject.namespace": ns}.AsSelector().String()
	evs, err := cs.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range evs.Items {
		found = found || (e.Reason == "Nominated" && e.Source.Component == "nodewright")
	}
	if !found {
		t.Fatalf("no Nominated event on pod: %+v", evs.Items)
	}
}

func waitPDB(t *testing.T, ctx context.Context, cs kubernetes.Interface, ns, name string, allowed int32) {
	t.Helper()
	var p *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = cs.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == 1 && p.Status.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		t.Fatalf("PDB %s/%s never reached disruptionsAllowed=%d: %v (status %+v)", ns, name, allowed, err, p.Status)
	}
}

func TestDeletePod(t *testing.T) {
	ctx, c, cs, ns := setup(t)
	node := fakeNode(t, ctx, cs, "del-"+ns)
	pod := runningPod(t, ctx, cs, ns, "victim", node.Name, nil)
	zero := int64(0)
	if err := c.DeletePod(ctx, pod, &zero); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := cs.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("pod not deleted: %v", err)
	}
	if err := c.DeletePod(ctx, pod, &zero); err != nil {
		t.Fatalf("deleting a deleted pod: %v", err)
	}
}

// The snapshot against the real API server: field selectors, pagination
// (page size 1) and the scheduler's Unschedulable verdict.
func TestSnapshotAgainstAPIServer(t *testing.T) {
	ctx, c, cs, ns := setup(t)
	node := fakeNode(t, ctx, cs, "snap-"+ns)
	runningPod(t, ctx, cs, ns, "bound-0", node.Name, nil)
	runningPod(t, ctx, cs, ns, "bound-1", node.Name, nil)
	stuck := kubeplane.UnschedulablePod(ns, "stuck")
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, stuck, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var snap *kube.Snapshot
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		snap, err = c.Snapshot(ctx, kube.SnapshotOptions{PageSize: 1})
		if err != nil {
			return false, err
		}
		for _, p := range snap.PendingPods {
			if p.Namespace == ns && p.Name == "stuck" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("stuck pod never listed as unschedulable: %v", err)
	}
	var mine []string
	for _, p := range snap.PodsByNode[node.Name] {
		mine = append(mine, p.Name)
	}
	if len(mine) != 2 {
		t.Fatalf("pods on %s: %v", node.Name, mine)
	}
	foundNode := false
	for _, n := range snap.Nodes {
		foundNode = foundNode || n.Name == node.Name
	}
	if !foundNode {
		t.Fatalf("node %s missing from snapshot", node.Name)
	}
	if snap.NamespaceLabels[ns][corev1.LabelMetadataName] != ns {
		t.Fatalf("namespace %s labels %v", ns, snap.NamespaceLabels[ns])
	}
	onNode, err := c.PodsOnNode(ctx, node.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(onNode) != 2 {
		t.Fatalf("PodsOnNode: %d pods", len(onNode))
	}
}

// The whole EKS path: DescribeCluster (simulated EKS) for endpoint and CA, an
// STS-presigned token, and kube-apiserver authenticating it through the
// simulator's TokenReview webhook, which verifies the SigV4 signature and the
// x-k8s-aws-id header.
func TestEKSTokenAcceptedByAPIServer(t *testing.T) {
	lc := shared.Get(t)
	// Service-specific endpoint variables, as a user would set them.
	t.Setenv("AWS_ENDPOINT_URL_STS", lc.AWSEndpoint)
	t.Setenv("AWS_ENDPOINT_URL_EKS", lc.AWSEndpoint)
	t.Setenv("AWS_REGION", "us-west-2")
	t.Setenv("AWS_ACCESS_KEY_ID", awssim.DefaultAccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", awssim.DefaultSecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", "")
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c, err := kube.ForEKS(ctx, awsCfg, eks.NewFromConfig(awsCfg), clusterName, kube.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	review, err := c.Clientset().AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("API server refused the EKS token: %v (token reviews: %+v)", err, lc.AWS.Calls("tokenreview", ""))
	}
	wantUser := "arn:aws:iam::" + awssim.DefaultAccountID + ":role/nodewright"
	if review.Status.UserInfo.Username != wantUser {
		t.Fatalf("authenticated as %q, want %q", review.Status.UserInfo.Username, wantUser)
	}
	// The client works for real calls too (system:masters via the identity mapping).
	if _, err := c.Snapshot(ctx, kube.SnapshotOptions{Parts: kube.PartNodes | kube.PartPDBs}); err != nil {
		t.Fatalf("snapshot with EKS token: %v", err)
	}
	if n := len(lc.AWS.Calls("tokenreview", "TokenReview")); n == 0 {
		t.Fatal("simulator saw no TokenReview: the token did not go through the webhook")
	}

	// A token signed for another cluster is rejected.
	ep, err := kube.DescribeEndpoint(ctx, eks.NewFromConfig(awsCfg), clusterName)
	if err != nil {
		t.Fatal(err)
	}
	wrong, err := kube.NewTokenSource(awsCfg, "some-other-cluster")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kube.RESTConfig(ep, wrong, kube.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := kube.NewClient(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bad.Clientset().CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("token for another cluster: want 401, got %v", err)
	}
}
