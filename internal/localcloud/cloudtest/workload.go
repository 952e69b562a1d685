package cloudtest

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
)

// Workload is a Deployment of pause pods labelled app=Name and, when
// MinAvailable or MaxUnavailable is set, a PodDisruptionBudget of the same
// name over them. Nil pointers leave Kubernetes' defaults.
type Workload struct {
	Name        string
	Replicas    int32
	CPU, Memory string // each pod's requests
	// NodeSelector keeps the pods to the test's NodePool.
	NodeSelector map[string]string
	// GraceSeconds is the pods' terminationGracePeriodSeconds.
	GraceSeconds *int64
	// NoServiceAccountToken leaves the service account token unmounted.
	NoServiceAccountToken bool
	// MinAvailable and MaxUnavailable are the PDB's (at most one).
	MinAvailable, MaxUnavailable *int32
}

// Deploy creates w in namespace ns, failing t if the API server refuses it.
func (w Workload) Deploy(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns string) {
	t.Helper()
	labels := map[string]string{"app": w.Name}
	spec := pauseSpec(w.NodeSelector, w.CPU, w.Memory)
	spec.TerminationGracePeriodSeconds = w.GraceSeconds
	if w.NoServiceAccountToken {
		spec.AutomountServiceAccountToken = new(bool)
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &w.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
	if _, err := cs.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if w.MinAvailable == nil && w.MaxUnavailable == nil {
		return
	}
	PDB{Name: w.Name, MinAvailable: w.MinAvailable, MaxUnavailable: w.MaxUnavailable}.Create(ctx, t, cs, ns)
}

// PDB is a PodDisruptionBudget named Name over the pods labelled app=Name,
// with MinAvailable or MaxUnavailable (at most one).
type PDB struct {
	Name                         string
	MinAvailable, MaxUnavailable *int32
}

// Create creates p in namespace ns, failing t if the API server refuses it.
func (p PDB) Create(ctx context.Context, t testing.TB, cs kubernetes.Interface, ns string) {
	t.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": p.Name}}},
	}
	if p.MinAvailable != nil {
		pdb.Spec.MinAvailable = new(intstr.FromInt32(*p.MinAvailable))
	}
	if p.MaxUnavailable != nil {
		pdb.Spec.MaxUnavailable = new(intstr.FromInt32(*p.MaxUnavailable))
	}
	if _, err := cs.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// PausePod is a pause pod named name in namespace ns, labelled app=app,
// requesting cpu and memory on a node nodeSelector matches.
func PausePod(ns, name, app string, nodeSelector map[string]string, cpu, memory string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": app}},
		Spec:       pauseSpec(nodeSelector, cpu, memory),
	}
}

func pauseSpec(nodeSelector map[string]string, cpu, memory string) corev1.PodSpec {
	return corev1.PodSpec{
		NodeSelector: nodeSelector,
		Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		}}},
	}
}
