package main

import (
	"fmt"
	"math/rand"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/simulation"
)

// loadDiverse is the workload of Karpenter's scheduling benchmark
// (makeDiversePods) on nodewright's real catalog: five equal groups
// (generic, zonal spread, hostname spread, zonal self-affinity, hostname
// anti-affinity), CPU and memory drawn from a source seeded with 42 in the
// order Karpenter's helpers draw them. nodewright's own benchmarks generate
// the same shape (internal/scheduling/helpers_test.go).
func loadDiverse(count int, f benchFlags) (*simulation.Setup, error) {
	dir := filepath.Join(moduleDir(), "testdata", "diverse")
	setup, err := simulation.Load(simulation.Sources{
		Config: filepath.Join(dir, "config.yaml"), Workload: filepath.Join(dir, "workload.yaml"),
		Catalog: f.catalog, Region: f.region,
	})
	if err != nil {
		return nil, fmt.Errorf("diverse-%d: %w", count, err)
	}
	setup.Input.Pods = diversePods(count, 42)
	return setup, nil
}

// moduleDir is this module's folder inside the repository.
func moduleDir() string {
	return filepath.Join(repoRoot(), "internal", "scheduling", "karpentercompare")
}

type diverseGen struct {
	r    *rand.Rand
	pods []*corev1.Pod
}

func diversePods(count int, seed int64) []*corev1.Pod {
	g := &diverseGen{r: rand.New(rand.NewSource(seed))}
	per := count / 5
	g.generic(per)
	g.spread(per, corev1.LabelTopologyZone)
	g.spread(per, corev1.LabelHostname)
	g.affinity(per, corev1.LabelTopologyZone)
	g.antiAffinity(per, corev1.LabelHostname)
	g.generic(count - len(g.pods))
	return g.pods
}

func (g *diverseGen) value() string {
	return []string{"a", "b", "c", "d", "e", "f", "g"}[g.r.Intn(7)]
}

// requests draws CPU then memory, as Karpenter's randomCPU/randomMemory.
func (g *diverseGen) requests() corev1.ResourceList {
	cpu := []string{"100m", "250m", "500m", "1000m", "1500m"}[g.r.Intn(5)]
	mem := []string{"100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"}[g.r.Intn(6)]
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

func (g *diverseGen) add(labels map[string]string, requests corev1.ResourceList, mutate func(*corev1.Pod)) {
	name := fmt.Sprintf("diverse-%d", len(g.pods))
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: labels, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "pause", Resources: corev1.ResourceRequirements{Requests: requests},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if mutate != nil {
		mutate(p)
	}
	g.pods = append(g.pods, p)
}

func (g *diverseGen) generic(n int) {
	for range n {
		l := map[string]string{"my-label": g.value()}
		g.add(l, g.requests(), nil)
	}
}

func (g *diverseGen) spread(n int, key string) {
	for range n {
		l := map[string]string{"my-label": g.value()}
		sel := map[string]string{"my-label": g.value()}
		g.add(l, g.requests(), func(p *corev1.Pod) {
			p.Spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
				MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
			}}
		})
	}
}

// affinity pods have required affinity to their own label (self-affinity,
// so every group can start a domain).
func (g *diverseGen) affinity(n int, key string) {
	for range n {
		l := map[string]string{"my-affininity": g.value()}
		g.add(l, g.requests(), func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: key,
				}},
			}}
		})
	}
}

// antiAffinity pods all repel each other: one per domain of key.
func (g *diverseGen) antiAffinity(n int, key string) {
	l := map[string]string{"app": "nginx"}
	for range n {
		g.add(l, g.requests(), func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
					LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: key,
				}},
			}}
		})
	}
}
