package pods

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

type evictionPodOpt func(*corev1.Pod)

func evictionPod(opts ...evictionPodOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func evictionOwner(kind string) evictionPodOpt {
	return func(p *corev1.Pod) {
		p.OwnerReferences = append(p.OwnerReferences, metav1.OwnerReference{Kind: kind, Name: "o"})
	}
}

func evictionPriority(name string) evictionPodOpt {
	return func(p *corev1.Pod) { p.Spec.PriorityClassName = name }
}

func evictionAnnotated(k, v string) evictionPodOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{k: v} }
}

func evictionDeletingAt(t time.Time) evictionPodOpt {
	return func(p *corev1.Pod) { mt := metav1.NewTime(t); p.DeletionTimestamp = &mt }
}

func evictionGrace(s int64) evictionPodOpt {
	return func(p *corev1.Pod) { p.Spec.TerminationGracePeriodSeconds = &s }
}

func evictionToleration(tol corev1.Toleration) evictionPodOpt {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, tol) }
}

func TestEvictable(t *testing.T) {
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"running":              {evictionPod(), true},
		"terminating":          {evictionPod(evictionDeletingAt(time.Now())), false},
		"do-not-disrupt":       {evictionPod(evictionAnnotated(apis.DoNotDisruptAnnotKey, "true")), false},
		"do-not-disrupt=false": {evictionPod(evictionAnnotated(apis.DoNotDisruptAnnotKey, "false")), true},
	} {
		if got := Evictable(c.pod); got != c.want {
			t.Errorf("%s: Evictable = %v, want %v", name, got, c.want)
		}
	}
}

func TestEvictionGroup(t *testing.T) {
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		want int
	}{
		"plain":                {evictionPod(evictionOwner("ReplicaSet")), GroupNonCritical},
		"daemon":               {evictionPod(evictionOwner("DaemonSet")), GroupNonCriticalDaemon},
		"cluster-critical":     {evictionPod(evictionPriority("system-cluster-critical")), GroupCritical},
		"node-critical":        {evictionPod(evictionPriority("system-node-critical")), GroupCritical},
		"critical daemon":      {evictionPod(evictionPriority("system-node-critical"), evictionOwner("DaemonSet")), GroupCriticalDaemon},
		"other priority class": {evictionPod(evictionPriority("high")), GroupNonCritical},
	} {
		if got := EvictionGroup(c.pod); got != c.want {
			t.Errorf("%s: EvictionGroup = %d, want %d", name, got, c.want)
		}
	}
}

func TestForcedDeletionFinishesByTheDeadline(t *testing.T) {
	now := time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)
	deadline := now.Add(time.Minute)
	if _, due := ForcedDeletion(evictionPod(evictionGrace(30)), deadline, now); due {
		t.Error("pod with 30s grace deleted 60s before the deadline")
	}
	if g, due := ForcedDeletion(evictionPod(evictionGrace(90)), deadline, now); !due || g != 60 {
		t.Errorf("pod with 90s grace: due=%v grace=%d, want due with 60s", due, g)
	}
	if g, due := ForcedDeletion(evictionPod(), deadline, deadline.Add(time.Second)); !due || g != 0 {
		t.Errorf("past the deadline: due=%v grace=%d, want 0", due, g)
	}
	// Already terminating within the deadline: left alone.
	if _, due := ForcedDeletion(evictionPod(evictionGrace(90), evictionDeletingAt(deadline)), deadline, now); due {
		t.Error("pod already terminating by the deadline deleted again")
	}
	// Terminating past the deadline: shortened.
	if g, due := ForcedDeletion(evictionPod(evictionGrace(600), evictionDeletingAt(now.Add(10*time.Minute))), deadline, now); !due || g != 60 {
		t.Errorf("long termination not shortened: due=%v grace=%d", due, g)
	}
}

func TestToleratesDisrupted(t *testing.T) {
	for name, c := range map[string]struct {
		tol  corev1.Toleration
		want bool
	}{
		"exists everything": {corev1.Toleration{Operator: corev1.TolerationOpExists}, true},
		"exists key":        {corev1.Toleration{Key: apis.DisruptedTaintKey, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}, true},
		"equal no value":    {corev1.Toleration{Key: apis.DisruptedTaintKey}, true},
		"equal other value": {corev1.Toleration{Key: apis.DisruptedTaintKey, Operator: corev1.TolerationOpEqual, Value: "x"}, false},
		"other key":         {corev1.Toleration{Key: "other", Operator: corev1.TolerationOpExists}, false},
		"noexecute only":    {corev1.Toleration{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}, false},
	} {
		if got := ToleratesDisrupted(evictionPod(evictionToleration(c.tol))); got != c.want {
			t.Errorf("%s: ToleratesDisrupted = %v, want %v", name, got, c.want)
		}
	}
	if ToleratesDisrupted(evictionPod()) {
		t.Error("a pod without tolerations tolerates the disrupted taint")
	}
}

func TestIsMirrorOrStatic(t *testing.T) {
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		want bool
	}{
		"mirror":    {evictionPod(evictionAnnotated(corev1.MirrorPodAnnotationKey, "x")), true},
		"static":    {evictionPod(evictionOwner("Node")), true},
		"daemonset": {evictionPod(evictionOwner("DaemonSet")), false},
		"bare":      {evictionPod(), false},
	} {
		if got := IsMirrorOrStatic(c.pod); got != c.want {
			t.Errorf("%s: IsMirrorOrStatic = %v, want %v", name, got, c.want)
		}
	}
	if !ownedBy(evictionPod(evictionOwner("ReplicaSet"), evictionOwner("DaemonSet")), "DaemonSet") {
		t.Error("ownedBy misses the second owner reference")
	}
}
