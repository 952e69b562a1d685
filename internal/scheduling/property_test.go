package scheduling_test

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/scheduling"
)

// randomInput builds a random but valid cluster: a few NodePools (taints,
// arch and capacity-type requirements, limits), a random catalog with
// some offerings unavailable, existing nodes with pods, DaemonSets, and
// deployments mixing every constraint kind.
func randomInput(r *rand.Rand) *scheduling.Input {
	zones := []string{"zone-a", "zone-b", "zone-c"}
	var types []*scheduling.InstanceType
	for i, n := 0, 3+r.Intn(8); i < n; i++ {
		cpu := []int{1, 2, 4, 8, 16}[r.Intn(5)]
		mem := cpu * []int{1, 2, 4, 8}[r.Intn(4)]
		arch := []string{"amd64", "arm64"}[r.Intn(2)]
		price := float64(cpu)*0.03 + float64(mem)*0.004 + float64(r.Intn(5))*0.001
		var offs []scheduling.Offering
		for _, z := range zones {
			if r.Intn(4) > 0 {
				offs = append(offs, od(z, price))
			}
			if r.Intn(3) > 0 {
				offs = append(offs, spot(z, price*(0.3+0.4*r.Float64())))
			}
		}
		if len(offs) == 0 {
			offs = append(offs, od(zones[r.Intn(3)], price))
		}
		types = append(types, mkType(fmt.Sprintf("t%d.%dx", i, cpu), cpu, mem, 8+r.Intn(100), arch, price, offs...))
	}
	inp := &scheduling.Input{DefaultInstanceTypes: types, Unavailable: map[scheduling.OfferingKey]bool{}}
	for _, it := range types {
		for _, o := range it.Offerings {
			if r.Intn(10) == 0 {
				inp.Unavailable[scheduling.OfferingKey{InstanceType: it.Name, Zone: o.Zone, CapacityType: o.CapacityType}] = true
			}
		}
	}
	taint := corev1.Taint{Key: "dedicated", Value: "special", Effect: corev1.TaintEffectNoSchedule}
	for i, n := 0, 1+r.Intn(3); i < n; i++ {
		p := &scheduling.NodePool{Name: fmt.Sprintf("pool-%d", i), Weight: int32(r.Intn(3)), Labels: map[string]string{"pool": fmt.Sprint(i)}}
		if r.Intn(3) == 0 {
			p.Taints = []corev1.Taint{taint}
		}
		if r.Intn(3) == 0 {
			p.Requirements = p.Requirements.Add(req(scheduling.LabelArch, in, []string{"amd64", "arm64"}[r.Intn(2)]))
		}
		if r.Intn(3) == 0 {
			p.Requirements = p.Requirements.Add(req(scheduling.LabelCapacityType, in, "on-demand"))
		}
		if r.Intn(4) == 0 {
			p.Limits = rl("cpu", fmt.Sprint(8+r.Intn(64)))
		}
		inp.NodePools = append(inp.NodePools, p)
	}
	for i, n := 0, r.Intn(3); i < n; i++ {
		z := zones[r.Intn(3)]
		node := existing(fmt.Sprintf("node-%d", i), z, fmt.Sprint(2+r.Intn(6)))
		for j, m := 0, r.Intn(3); j < m; j++ {
			node.Pods = append(node.Pods, mkPod(podOpts{name: fmt.Sprintf("old-%d-%d", i, j), cpu: "500m", mem: "256Mi",
				labels: map[string]string{"app": fmt.Sprintf("app%d", r.Intn(6))}}))
		}
		if r.Intn(3) == 0 {
			guard := mkPod(podOpts{name: fmt.Sprintf("guard-%d", i), cpu: "100m", affinity: podAff("anti", scheduling.LabelHostname, map[string]string{"app": fmt.Sprintf("app%d", r.Intn(6))})})
			node.Pods = append(node.Pods, guard)
		}
		inp.Nodes = append(inp.Nodes, node)
	}
	if r.Intn(2) == 0 {
		ds := mkPod(podOpts{name: "ds", cpu: []string{"50m", "200m", "1"}[r.Intn(3)], mem: "128Mi"})
		if r.Intn(2) == 0 {
			ds.Spec.NodeSelector = map[string]string{scheduling.LabelArch: "amd64"}
		}
		if r.Intn(2) == 0 {
			ds.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}
		if r.Intn(4) == 0 {
			ds.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 9100, HostPort: 9100}}
		}
		inp.DaemonSets = []*appsv1.DaemonSet{{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: "kube-system"},
			Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{Spec: ds.Spec}}}}
	}
	seq := 0
	for d, n := 0, 1+r.Intn(8); d < n; d++ {
		app := fmt.Sprintf("app%d", d)
		l := map[string]string{"app": app}
		o := podOpts{labels: l, cpu: []string{"100m", "250m", "500m", "1", "2", "3"}[r.Intn(6)], mem: []string{"128Mi", "512Mi", "1Gi", "4Gi", "8Gi"}[r.Intn(5)]}
		if r.Intn(4) == 0 {
			o.nodeSelector = map[string]string{scheduling.LabelArch: []string{"amd64", "arm64"}[r.Intn(2)]}
		}
		if r.Intn(3) == 0 {
			o.tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "special", Effect: corev1.TaintEffectNoSchedule}}
		}
		var volume string
		switch r.Intn(9) {
		case 6:
			o.affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"zone-x"}}}},
					{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{zones[r.Intn(3)]}}}},
				}}}}
		case 7:
			volume = zones[r.Intn(3)]
		case 0:
			o.spread = []corev1.TopologySpreadConstraint{spreadC(scheduling.LabelZone, int32(1+r.Intn(2)), l, corev1.DoNotSchedule)}
			o.nodeSelector = nil
		case 1:
			o.spread = []corev1.TopologySpreadConstraint{spreadC(scheduling.LabelHostname, int32(1+r.Intn(3)), l, []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}[r.Intn(2)])}
		case 2:
			o.affinity = podAff("anti", []string{scheduling.LabelHostname, scheduling.LabelZone}[r.Intn(2)], l)
		case 3:
			o.affinity = podAff("affinity", []string{scheduling.LabelHostname, scheduling.LabelZone}[r.Intn(2)], l)
		case 4:
			o.hostPort = int32(8000 + r.Intn(3))
		case 5:
			o.affinity = podAff("prefer-anti", scheduling.LabelHostname, l)
		}
		for i, reps := 0, 1+r.Intn(12); i < reps; i++ {
			o.name = fmt.Sprintf("%s-%d", app, i)
			o.seq = seq
			seq++
			p := mkPod(o)
			if volume != "" {
				pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-" + o.name}, Spec: corev1.PersistentVolumeSpec{
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: scheduling.LabelZone, Operator: corev1.NodeSelectorOpIn, Values: []string{volume}}}}}}}}}
				pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data-" + o.name, Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: pv.Name}}
				inp.PersistentVolumes = append(inp.PersistentVolumes, pv)
				inp.PersistentVolumeClaims = append(inp.PersistentVolumeClaims, pvc)
				p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc.Name}}}}
			}
			inp.Pods = append(inp.Pods, p)
		}
	}
	return inp
}

func TestPropertyEveryPlacementSatisfiesEveryConstraint(t *testing.T) {
	runs := 300
	if testing.Short() {
		runs = 60
	}
	placedTotal, unschedTotal, resplitSaved := 0, 0, 0
	reasons := map[string]int{}
	for seed := 0; seed < runs; seed++ {
		r := rand.New(rand.NewSource(int64(seed)))
		in := randomInput(r)
		plan, err := scheduling.Solve(context.Background(), in)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if errs := planErrors(in, plan); len(errs) > 0 {
			t.Errorf("seed %d: %d violations, first: %s", seed, len(errs), strings.Join(errs[:min(3, len(errs))], " | "))
		}
		if checkAgainstGreedy(t, seed, plan) {
			resplitSaved++
		}
		for _, c := range plan.NodeClaims {
			placedTotal += len(c.Pods)
		}
		unschedTotal += len(plan.Unschedulable)
		for _, u := range plan.Unschedulable {
			reasons[u.Reason]++
		}
	}
	type kv struct {
		r string
		n int
	}
	var top []kv
	for r, n := range reasons {
		top = append(top, kv{r, n})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].n > top[j].n || (top[i].n == top[j].n && top[i].r < top[j].r) })
	for i := 0; i < len(top) && i < 12; i++ {
		t.Logf("%5d x %s", top[i].n, top[i].r)
	}
	t.Logf("%d random clusters: %d pods on new claims, %d unschedulable; re-split made %d plans cheaper", runs, placedTotal, unschedTotal, resplitSaved)
}

// checkAgainstGreedy holds the re-split pass and the lower bound to their
// promises on a random cluster: the plan never costs more than greedy
// filling alone on the same input, never places fewer pods, and never
// costs less than its own lower bound. It reports whether the plan is
// cheaper than greedy filling.
func checkAgainstGreedy(t *testing.T, seed int, plan *scheduling.Plan) bool {
	t.Helper()
	in := randomInput(rand.New(rand.NewSource(int64(seed))))
	greedy, err := scheduling.SolveWithOptions(context.Background(), in, scheduling.Options{DisableResplit: true})
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
		return false
	}
	// The objective is the expected launch price (spot: see launchPrice).
	if plan.ExpectedCostPerHour > greedy.ExpectedCostPerHour+1e-9 || len(plan.Unschedulable) > len(greedy.Unschedulable) {
		t.Errorf("seed %d: plan $%.4f/h expected with %d unschedulable; greedy filling $%.4f/h with %d", seed,
			plan.ExpectedCostPerHour, len(plan.Unschedulable), greedy.ExpectedCostPerHour, len(greedy.Unschedulable))
	}
	if plan.CostPerHour < plan.LowerBoundPerHour-1e-9 {
		t.Errorf("seed %d: plan $%.4f/h below its lower bound $%.4f/h", seed, plan.CostPerHour, plan.LowerBoundPerHour)
	}
	return plan.ExpectedCostPerHour < greedy.ExpectedCostPerHour-1e-9
}
