package scheduling_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/scheduling"
)

func req(key string, op corev1.NodeSelectorOperator, vals ...string) scheduling.Requirement {
	return scheduling.MustRequirement(key, op, vals...)
}

const (
	in     = corev1.NodeSelectorOpIn
	notIn  = corev1.NodeSelectorOpNotIn
	exists = corev1.NodeSelectorOpExists
	dne    = corev1.NodeSelectorOpDoesNotExist
	gt     = corev1.NodeSelectorOpGt
	lt     = corev1.NodeSelectorOpLt
)

func TestRequirementIntersection(t *testing.T) {
	cases := []struct {
		name       string
		a, b       scheduling.Requirement
		has        []string
		hasNot     []string
		absent     bool
		satisfiabl bool
		op         corev1.NodeSelectorOperator
	}{
		{"in-in", req("k", in, "a", "b"), req("k", in, "b", "c"), []string{"b"}, []string{"a", "c"}, false, true, in},
		{"in-notin", req("k", in, "a", "b"), req("k", notIn, "a"), []string{"b"}, []string{"a"}, false, true, in},
		{"notin-notin", req("k", notIn, "a"), req("k", notIn, "b"), []string{"c", "zzz"}, []string{"a", "b"}, true, true, notIn},
		{"exists-notin", req("k", exists), req("k", notIn, "a"), []string{"b"}, []string{"a"}, false, true, notIn},
		{"exists-dne", req("k", exists), req("k", dne), nil, []string{"a"}, false, false, dne},
		{"dne-notin", req("k", dne), req("k", notIn, "a"), nil, []string{"a", "b"}, true, true, dne},
		{"in-disjoint", req("k", in, "a"), req("k", in, "b"), nil, []string{"a", "b"}, false, false, dne},
		{"gt-lt", req("k", gt, "4"), req("k", lt, "8"), []string{"5", "7"}, []string{"4", "8", "x"}, false, true, gt},
		{"gt-in", req("k", gt, "4"), req("k", in, "2", "6", "x"), []string{"6"}, []string{"2", "x"}, false, true, in},
		{"gt-lt-empty", req("k", gt, "4"), req("k", lt, "5"), nil, []string{"4", "5"}, false, false, gt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, x := range []scheduling.Requirement{c.a.Intersection(&c.b), c.b.Intersection(&c.a)} {
				for _, v := range c.has {
					if !x.Has(v) {
						t.Errorf("%s should admit %q", x.String(), v)
					}
				}
				for _, v := range c.hasNot {
					if x.Has(v) {
						t.Errorf("%s should not admit %q", x.String(), v)
					}
				}
				if x.AllowsAbsent() != c.absent {
					t.Errorf("%s: absent allowed = %v, want %v", x.String(), x.AllowsAbsent(), c.absent)
				}
				if x.Satisfiable() != c.satisfiabl {
					t.Errorf("%s: satisfiable = %v, want %v", x.String(), x.Satisfiable(), c.satisfiabl)
				}
				if x.Operator() != c.op {
					t.Errorf("%s: operator %s, want %s", x.String(), x.Operator(), c.op)
				}
			}
		})
	}
}

func TestRequirementMinValuesAndErrors(t *testing.T) {
	a := req("k", exists)
	a.MinValues = 2
	b := req("k", in, "x", "y", "z")
	b.MinValues = 3
	if got := a.Intersection(&b).MinValues; got != 3 {
		t.Errorf("minValues of intersection = %d, want the larger 3", got)
	}
	if _, err := scheduling.NewRequirement("k", gt, "x"); err == nil {
		t.Error("Gt with a non-integer must fail")
	}
	if _, err := scheduling.NewRequirement("k", gt, "1", "2"); err == nil {
		t.Error("Gt with two values must fail")
	}
	if _, err := scheduling.NewRequirement("k", "Near", "1"); err == nil {
		t.Error("unknown operator must fail")
	}
}

func TestRequirementsCompatible(t *testing.T) {
	pool := scheduling.NewRequirements(req("team", in, "a"), req(scheduling.LabelArch, in, "amd64"))
	cases := []struct {
		name string
		pod  scheduling.Requirements
		ok   bool
		msg  string
	}{
		{"same custom value", scheduling.NewRequirements(req("team", in, "a")), true, ""},
		{"other custom value", scheduling.NewRequirements(req("team", in, "b")), false, "team: node side requires in [a] but pod requires in [b]"},
		{"undefined custom In", scheduling.NewRequirements(req("env", in, "prod")), false, `label "env" is not defined by the NodePool`},
		{"undefined custom NotIn", scheduling.NewRequirements(req("env", notIn, "prod")), true, ""},
		{"undefined custom DoesNotExist", scheduling.NewRequirements(req("env", dne)), true, ""},
		{"undefined custom Exists", scheduling.NewRequirements(req("env", exists)), false, "not defined"},
		{"undefined well-known", scheduling.NewRequirements(req(scheduling.LabelZone, in, "zone-a")), true, ""},
		{"undefined aws label", scheduling.NewRequirements(req("karpenter.k8s.aws/instance-family", in, "m5")), true, ""},
		{"arch conflict", scheduling.NewRequirements(req(scheduling.LabelArch, in, "arm64")), false, "arch: node side requires in [amd64] but pod requires in [arm64]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := pool.Compatible(c.pod)
			if (err == nil) != c.ok {
				t.Fatalf("Compatible = %v, want ok=%v", err, c.ok)
			}
			if err != nil && !strings.Contains(err.Error(), c.msg) {
				t.Errorf("message %q does not contain %q", err.Error(), c.msg)
			}
		})
	}
	lbl := map[string]string{"team": "a", scheduling.LabelArch: "amd64"}
	if !pool.MatchesLabels(lbl) {
		t.Error("labels should match")
	}
	if scheduling.NewRequirements(req("gpu", exists)).MatchesLabels(lbl) {
		t.Error("Exists on a missing label must not match")
	}
	if !scheduling.NewRequirements(req("gpu", notIn, "x")).MatchesLabels(lbl) {
		t.Error("NotIn on a missing label must match")
	}
}

func TestPodRequests(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	c := func(cpu, mem string) corev1.Container {
		return corev1.Container{Resources: corev1.ResourceRequirements{Requests: rl("cpu", cpu, "memory", mem)}}
	}
	sidecar := c("200m", "100Mi")
	sidecar.RestartPolicy = &always
	limitOnly := corev1.Container{Resources: corev1.ResourceRequirements{Limits: rl("cpu", "300m")}}
	cases := []struct {
		name     string
		spec     corev1.PodSpec
		cpu, mem string
	}{
		{"containers add", corev1.PodSpec{Containers: []corev1.Container{c("1", "1Gi"), c("500m", "512Mi")}}, "1500m", "1536Mi"},
		{"init peak dominates", corev1.PodSpec{InitContainers: []corev1.Container{c("3", "100Mi")}, Containers: []corev1.Container{c("1", "1Gi")}}, "3", "1Gi"},
		// Sidecar runs alongside containers (+200m) and alongside the later init container (2+0.2).
		{"sidecar", corev1.PodSpec{InitContainers: []corev1.Container{sidecar, c("2", "100Mi")}, Containers: []corev1.Container{c("1", "1Gi")}}, "2200m", "1124Mi"},
		// An init container before the sidecar does not run with it.
		{"init before sidecar", corev1.PodSpec{InitContainers: []corev1.Container{c("2", "100Mi"), sidecar}, Containers: []corev1.Container{c("1", "1Gi")}}, "2", "1124Mi"},
		{"overhead", corev1.PodSpec{Containers: []corev1.Container{c("1", "1Gi")}, Overhead: rl("cpu", "250m", "memory", "120Mi")}, "1250m", "1144Mi"},
		{"limit as request", corev1.PodSpec{Containers: []corev1.Container{limitOnly}}, "300m", "0"},
		// Pod-level resources (spec.resources) replace the container aggregate for what they set.
		{"pod-level requests", podLevel(rl("cpu", "6", "memory", "12Gi"), nil, c("1", "1Gi")), "6", "12Gi"},
		{"pod-level cpu only", podLevel(rl("cpu", "2"), nil, c("1", "1Gi")), "2", "1Gi"},
		{"pod-level below init peak", corev1.PodSpec{InitContainers: []corev1.Container{c("3", "100Mi")}, Containers: []corev1.Container{c("1", "1Gi")},
			Resources: &corev1.ResourceRequirements{Requests: rl("cpu", "2", "memory", "1Gi")}}, "2", "1Gi"},
		// A pod-level limit without a request defaults the request to the limit
		// where no container asks for the resource, else to the container aggregate.
		{"pod-level limit only", podLevel(nil, rl("cpu", "4", "memory", "8Gi"), corev1.Container{}), "4", "8Gi"},
		{"pod-level limit, container request", podLevel(nil, rl("cpu", "4", "memory", "8Gi"), corev1.Container{Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1")}}), "1", "8Gi"},
		{"pod-level limit, container limit", podLevel(nil, rl("cpu", "4"), limitOnly), "300m", "0"},
		{"pod-level ignores other resources", podLevel(rl("ephemeral-storage", "5Gi"), nil, c("1", "1Gi")), "1", "1Gi"},
		{"pod-level plus overhead", withOverhead(podLevel(rl("cpu", "2", "memory", "2Gi"), nil, c("1", "1Gi")), rl("cpu", "250m", "memory", "120Mi")), "2250m", "2168Mi"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := scheduling.PodRequests(&corev1.Pod{Spec: tc.spec})
			if q := got[corev1.ResourceCPU]; q.Cmp(resource.MustParse(tc.cpu)) != 0 {
				t.Errorf("cpu = %s, want %s", q.String(), tc.cpu)
			}
			if q := got[corev1.ResourceMemory]; q.Cmp(resource.MustParse(tc.mem)) != 0 {
				t.Errorf("memory = %s, want %s", q.String(), tc.mem)
			}
		})
	}
}

// podLevel is a pod spec with pod-level requests and limits over containers.
func podLevel(req, lim corev1.ResourceList, containers ...corev1.Container) corev1.PodSpec {
	return corev1.PodSpec{Containers: containers, Resources: &corev1.ResourceRequirements{Requests: req, Limits: lim}}
}

func withOverhead(spec corev1.PodSpec, overhead corev1.ResourceList) corev1.PodSpec {
	spec.Overhead = overhead
	return spec
}

func TestPodRequestsPodLevelHugePages(t *testing.T) {
	// Hugepages are not overcommittable: a pod-level limit without a request
	// becomes the request even when containers ask for hugepages.
	ctr := corev1.Container{Resources: corev1.ResourceRequirements{Requests: rl("hugepages-2Mi", "100Mi"), Limits: rl("hugepages-2Mi", "100Mi")}}
	got := scheduling.PodRequests(&corev1.Pod{Spec: podLevel(nil, rl("hugepages-2Mi", "200Mi"), ctr)})
	if q := got["hugepages-2Mi"]; q.Cmp(resource.MustParse("200Mi")) != 0 {
		t.Errorf("hugepages-2Mi = %s, want 200Mi", q.String())
	}
}

func TestTolerations(t *testing.T) {
	taint := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	cases := []struct {
		tol  corev1.Toleration
		want bool
	}{
		{corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "gpu"}, true},
		{corev1.Toleration{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}, true},
		{corev1.Toleration{Key: "dedicated", Value: "cpu"}, false},
		{corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}, true},
		{corev1.Toleration{Operator: corev1.TolerationOpExists}, true},
		{corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, false},
	}
	for i, c := range cases {
		if got := scheduling.ToleratesTaint([]corev1.Toleration{c.tol}, &taint); got != c.want {
			t.Errorf("case %d %+v: got %v want %v", i, c.tol, got, c.want)
		}
	}
}
