package pods

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
)

var epoch = time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)

func mkPod(name string, mut ...func(*corev1.Pod)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: k8stypes.UID("uid-" + name)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	for _, m := range mut {
		m(p)
	}
	return p
}

func withOwner(kind string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: "owner"}} }
}

func withDoNotDisrupt(v string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: v} }
}

func TestReschedulable(t *testing.T) {
	deleting := metav1.NewTime(epoch)
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want bool
	}{
		{"workload", mkPod("web"), true},
		{"replicaset", mkPod("web", withOwner("ReplicaSet")), true},
		{"daemon", mkPod("ds", withOwner("DaemonSet")), false},
		{"static", mkPod("kube-proxy", withOwner("Node")), false},
		{"terminating", mkPod("web", func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }), false},
		{"succeeded", mkPod("job", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), false},
		{"failed", mkPod("job", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), false},
	} {
		if got := Reschedulable(tc.pod); got != tc.want {
			t.Errorf("%s: Reschedulable = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestEmpty(t *testing.T) {
	if !Empty(nil) || !Empty([]*corev1.Pod{mkPod("ds", withOwner("DaemonSet"))}) {
		t.Error("daemon-only node not empty")
	}
	if Empty([]*corev1.Pod{mkPod("ds", withOwner("DaemonSet")), mkPod("web")}) {
		t.Error("node with a workload pod empty")
	}
}

func TestLastPodEvent(t *testing.T) {
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", CreationTimestamp: metav1.NewTime(epoch)}}
	if got := LastPodEvent(cl); !got.Equal(epoch) {
		t.Errorf("new claim: %v, want its creation %v", got, epoch)
	}
	cl.SetCondition(apis.ConditionInitialized, metav1.ConditionTrue, "Initialized", "", metav1.NewTime(epoch.Add(time.Minute)))
	if got := LastPodEvent(cl); !got.Equal(epoch.Add(time.Minute)) {
		t.Errorf("initialized claim: %v, want its initialization", got)
	}
	cl.Status.LastPodEventTime = metav1.NewTime(epoch.Add(time.Hour))
	if got := LastPodEvent(cl); !got.Equal(epoch.Add(time.Hour)) {
		t.Errorf("claim with a pod event: %v, want the event", got)
	}
}

func TestDoNotDisrupt(t *testing.T) {
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	now := epoch.Add(time.Hour)
	if dnd, why := DoNotDisrupt(cl, node, []*corev1.Pod{mkPod("web")}, now); dnd || why != "" {
		t.Fatalf("unannotated node protected: %s", why)
	}
	started := func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(epoch) }
	for _, tc := range []struct {
		name string
		pods []*corev1.Pod
		want string // substring of the reason; "" for not protected
	}{
		{"pod true", []*corev1.Pod{mkPod("web", withDoNotDisrupt("true"))}, "pod ns/web"},
		{"pod grace running", []*corev1.Pod{mkPod("web", started, withDoNotDisrupt("2h"))}, "=2h"},
		{"pod grace over", []*corev1.Pod{mkPod("web", started, withDoNotDisrupt("30m"))}, ""},
		{"pod finished", []*corev1.Pod{mkPod("job", withDoNotDisrupt("true"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })}, ""},
		{"pod false", []*corev1.Pod{mkPod("web", withDoNotDisrupt("false"))}, ""},
	} {
		dnd, why := DoNotDisrupt(cl, node, tc.pods, now)
		if dnd != (tc.want != "") || !strings.Contains(why, tc.want) {
			t.Errorf("%s: DoNotDisrupt = %v %q, want reason containing %q", tc.name, dnd, why, tc.want)
		}
	}
	node.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
	if dnd, why := DoNotDisrupt(cl, node, nil, now); !dnd || !strings.Contains(why, "node") {
		t.Errorf("annotated node: %v %q", dnd, why)
	}
	cl.Annotations = map[string]string{apis.DoNotDisruptAnnotKey: "true"}
	if dnd, why := DoNotDisrupt(cl, nil, nil, now); !dnd || !strings.Contains(why, "NodeClaim") {
		t.Errorf("annotated claim: %v %q", dnd, why)
	}
}

func TestEvictionCost(t *testing.T) {
	p := mkPod("p")
	if c := EvictionCost(p); c != 1 {
		t.Errorf("plain pod cost %v", c)
	}
	prio := int32(1 << 30)
	p.Spec.Priority = &prio
	if c := EvictionCost(p); c != 10 {
		t.Errorf("clamped cost %v", c)
	}
}
