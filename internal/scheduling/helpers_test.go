package scheduling_test

import (
	"fmt"
	"math/rand"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/scheduling"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// podOpts describes a test pod; zero values mean "none".
type podOpts struct {
	name         string
	ns           string
	labels       map[string]string
	cpu, mem     string
	nodeSelector map[string]string
	tolerations  []corev1.Toleration
	affinity     *corev1.Affinity
	spread       []corev1.TopologySpreadConstraint
	hostPort     int32
	seq          int
}

func mkPod(o podOpts) *corev1.Pod {
	if o.ns == "" {
		o.ns = "default"
	}
	req := corev1.ResourceList{}
	if o.cpu != "" {
		req[corev1.ResourceCPU] = resource.MustParse(o.cpu)
	}
	if o.mem != "" {
		req[corev1.ResourceMemory] = resource.MustParse(o.mem)
	}
	c := corev1.Container{Name: "app", Resources: corev1.ResourceRequirements{Requests: req}}
	if o.hostPort > 0 {
		c.Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: o.hostPort}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: o.name, Namespace: o.ns, Labels: o.labels,
			UID:               types.UID(fmt.Sprintf("uid-%s-%s", o.ns, o.name)),
			CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(o.seq) * time.Millisecond)),
		},
		Spec: corev1.PodSpec{
			Containers:                []corev1.Container{c},
			NodeSelector:              o.nodeSelector,
			Tolerations:               o.tolerations,
			Affinity:                  o.affinity,
			TopologySpreadConstraints: o.spread,
		},
	}
}

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// mkType builds a type with every offering priced alike unless prices says otherwise.
func mkType(name string, cpu, memGi, pods int, arch string, price float64, offerings ...scheduling.Offering) *scheduling.InstanceType {
	alloc := rl("cpu", strconv.Itoa(cpu), "memory", fmt.Sprintf("%dGi", memGi), "pods", strconv.Itoa(pods))
	if len(offerings) == 0 {
		for _, z := range []string{"zone-a", "zone-b", "zone-c"} {
			offerings = append(offerings,
				scheduling.Offering{Zone: z, CapacityType: "on-demand", Price: price, Available: true},
				scheduling.Offering{Zone: z, CapacityType: "spot", Price: price * 0.4, Available: true})
		}
	}
	return &scheduling.InstanceType{
		Name: name,
		Labels: map[string]string{
			scheduling.LabelInstanceType: name, scheduling.LabelArch: arch, scheduling.LabelOS: "linux",
			"karpenter.k8s.aws/instance-family": familyOf(name),
		},
		Capacity: alloc, Allocatable: alloc, Offerings: offerings,
	}
}

func familyOf(name string) string {
	for i := range name {
		if name[i] == '.' {
			return name[:i]
		}
	}
	return name
}

func od(zone string, price float64) scheduling.Offering {
	return scheduling.Offering{Zone: zone, CapacityType: "on-demand", Price: price, Available: true}
}

func spot(zone string, price float64) scheduling.Offering {
	return scheduling.Offering{Zone: zone, CapacityType: "spot", Price: price, Available: true}
}

// benchTypes mirrors Karpenter's fake.InstanceTypes(n): type i has i+1
// vCPU, 2(i+1) GiB and 10(i+1) pods, spot in two zones and on-demand in
// three, all priced 0.1/vCPU + 0.1/GiB.
func benchTypes(n int) []*scheduling.InstanceType {
	out := make([]*scheduling.InstanceType, 0, n)
	for i := 0; i < n; i++ {
		cpu, mem := i+1, 2*(i+1)
		price := 0.1*float64(cpu) + 0.1*float64(mem)
		alloc := rl("cpu", strconv.Itoa(cpu), "memory", fmt.Sprintf("%dGi", mem), "pods", strconv.Itoa(10*(i+1)))
		name := fmt.Sprintf("fake-it-%d", i)
		out = append(out, &scheduling.InstanceType{
			Name: name,
			Labels: map[string]string{scheduling.LabelInstanceType: name, scheduling.LabelArch: "amd64",
				scheduling.LabelOS: "linux"},
			Capacity: alloc, Allocatable: alloc,
			Offerings: []scheduling.Offering{
				spot("test-zone-1", price), spot("test-zone-2", price),
				od("test-zone-1", price), od("test-zone-2", price), od("test-zone-3", price),
			},
		})
	}
	return out
}

// diversePods mirrors Karpenter's scheduling benchmark workload: five equal
// groups (generic, zonal spread, hostname spread, zonal self-affinity,
// hostname self-anti-affinity), CPU and memory drawn from a seeded source in
// the same order Karpenter's test helpers draw them.
func diversePods(count int, seed int64) []*corev1.Pod {
	r := rand.New(rand.NewSource(seed))
	val := func() string { return []string{"a", "b", "c", "d", "e", "f", "g"}[r.Intn(7)] }
	cpu := func() string { return []string{"100m", "250m", "500m", "1000m", "1500m"}[r.Intn(5)] }
	mem := func() string { return []string{"100Mi", "256Mi", "512Mi", "1024Mi", "2048Mi", "4096Mi"}[r.Intn(6)] }
	var pods []*corev1.Pod
	seq := 0
	add := func(o podOpts) {
		o.name = fmt.Sprintf("diverse-%d", seq)
		o.seq = seq
		seq++
		pods = append(pods, mkPod(o))
	}
	generic := func(n int) {
		for i := 0; i < n; i++ {
			l := map[string]string{"my-label": val()}
			add(podOpts{labels: l, cpu: cpu(), mem: mem()})
		}
	}
	spread := func(n int, key string) {
		for i := 0; i < n; i++ {
			l := map[string]string{"my-label": val()}
			sel := map[string]string{"my-label": val()}
			tsc := []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: key, WhenUnsatisfiable: corev1.DoNotSchedule,
				LabelSelector: &metav1.LabelSelector{MatchLabels: sel}}}
			add(podOpts{labels: l, spread: tsc, cpu: cpu(), mem: mem()})
		}
	}
	affinity := func(n int, key string) {
		for i := 0; i < n; i++ {
			l := map[string]string{"my-affininity": val()}
			a := &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: key}}}}
			add(podOpts{labels: l, affinity: a, cpu: cpu(), mem: mem()})
		}
	}
	anti := func(n int, key string) {
		l := map[string]string{"app": "nginx"}
		for i := 0; i < n; i++ {
			a := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: l}, TopologyKey: key}}}}
			add(podOpts{labels: l, affinity: a, cpu: cpu(), mem: mem()})
		}
	}
	per := count / 5
	generic(per)
	spread(per, corev1.LabelTopologyZone)
	spread(per, corev1.LabelHostname)
	affinity(per, corev1.LabelTopologyZone)
	anti(per, corev1.LabelHostname)
	generic(count - len(pods))
	return pods
}

func diverseInput(count int) *scheduling.Input {
	return &scheduling.Input{
		Pods:                 diversePods(count, 42),
		NodePools:            []*scheduling.NodePool{{Name: "default"}},
		DefaultInstanceTypes: benchTypes(400),
	}
}
