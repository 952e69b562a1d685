package termination

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func daemon(p *corev1.Pod) {
	p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: "DaemonSet", Name: "ds"})
}
func critical(p *corev1.Pod) { p.Spec.PriorityClassName = "system-node-critical" }
func doNotDisrupt(p *corev1.Pod) {
	p.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
}
func terminatingAt(t time.Time) podOpt {
	return func(p *corev1.Pod) { mt := metav1.NewTime(t); p.DeletionTimestamp = &mt }
}
func tolerates(tol corev1.Toleration) podOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tol) }
}

func names(ps []*corev1.Pod) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

func TestWaitingPodsSkipsWhatKarpenterSkips(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	pods := []*corev1.Pod{
		pod("app"),
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		pod("failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		pod("mirror", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		pod("static", func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: "Node", Name: "n"}} }),
		pod("tolerates-all", tolerates(corev1.Toleration{Operator: corev1.TolerationOpExists})),
		pod("tolerates-disrupted", daemon, tolerates(corev1.Toleration{Key: apis.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})),
		pod("tolerates-noexecute-only", tolerates(corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute})),
		pod("terminating", terminatingAt(now.Add(20*time.Second))),
		pod("stuck", terminatingAt(now.Add(-2*time.Minute))),
		pod("dnd", doNotDisrupt),
	}
	got := names(WaitingPods(pods, now))
	want := []string{"app", "tolerates-noexecute-only", "terminating", "dnd"}
	if len(got) != len(want) {
		t.Fatalf("waiting = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waiting = %v, want %v", got, want)
		}
	}
}

func TestEvictionGroupsInKarpenterOrder(t *testing.T) {
	now := time.Now()
	waiting := []*corev1.Pod{
		pod("cd", critical, daemon), pod("c", critical), pod("d", daemon), pod("b"), pod("a"),
		pod("dnd", doNotDisrupt), pod("gone", terminatingAt(now.Add(time.Minute))),
	}
	order := [][]string{{"a", "b"}, {"d"}, {"c"}, {"cd"}}
	for step, want := range order {
		got := names(NextEvictionGroup(waiting))
		if len(got) != len(want) || got[0] != want[0] || got[len(got)-1] != want[len(want)-1] {
			t.Fatalf("step %d: group %v, want %v", step, got, want)
		}
		// Once the group's evictions are accepted its pods are terminating
		// and the next group goes.
		for _, p := range waiting {
			for _, n := range want {
				if p.Name == n {
					terminatingAt(now.Add(time.Minute))(p)
				}
			}
		}
	}
	if g := NextEvictionGroup(waiting); len(g) != 0 {
		t.Fatalf("do-not-disrupt or terminating pods offered for eviction: %v", names(g))
	}
}

func TestBackoffGrowsFromTheMark(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	cl := &apis.NodeClaim{}
	cl.MarkForDeletion(apis.DeletionReasonManual, "", metav1.NewTime(t0))
	for _, c := range []struct {
		after, want time.Duration
	}{{0, MinRequeue}, {50 * time.Millisecond, MinRequeue}, {2 * time.Second, 2 * time.Second}, {time.Hour, MaxRequeue}} {
		if got := backoff(cl, t0.Add(c.after)); got != c.want {
			t.Errorf("backoff %v after the mark = %v, want %v", c.after, got, c.want)
		}
	}
}
