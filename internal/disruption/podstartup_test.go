package disruption

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
)

// The first pass opens the window and reports nothing; the next reports
// exactly the pods that became Ready in between (creation to Ready), not
// those ready before, not a restarted one, and a third pass with nothing
// new reports nothing again.
func TestPodStartupWindow(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	now := t0
	clock := func() time.Time { return now }
	var buf bytes.Buffer
	c := &Controller{d: Deps{Store: newMemStore(clock, nil), Metrics: metrics.New(&buf, nil), Now: clock}, log: slog.New(slog.DiscardHandler)}
	pod := func(created, ready time.Time, restarts int32) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(ready)}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: restarts}}
		return p
	}
	view := &state.Cluster{Nodes: []*state.Node{{Name: "a", Pods: []*corev1.Pod{
		pod(t0.Add(-time.Hour), t0.Add(-50*time.Minute), 0), // ready long before
		pod(t0.Add(10*time.Second), t0.Add(40*time.Second), 0),
		pod(t0.Add(20*time.Second), t0.Add(45*time.Second), 2), // restarted
	}}, {Name: "b", Pods: []*corev1.Pod{pod(t0.Add(5*time.Second), t0.Add(55*time.Second), 0)}}}}

	pass := func(at time.Time) []float64 {
		t.Helper()
		now = at
		buf.Reset()
		c.podStartup(t.Context(), view)
		if err := c.d.Metrics.Flush(); err != nil {
			t.Fatal(err)
		}
		return observed(t, buf.String())
	}
	if got := pass(t0); len(got) != 0 {
		t.Fatalf("first pass reported %v, want nothing", got)
	}
	if got := pass(t0.Add(time.Minute)); !slices.Equal(got, []float64{30, 50}) {
		t.Fatalf("second pass reported %v, want [30 50]", got)
	}
	if got := pass(t0.Add(2 * time.Minute)); len(got) != 0 {
		t.Fatalf("third pass reported %v, want nothing", got)
	}
}

// observed returns the pod startup values of EMF lines, sorted.
func observed(t *testing.T, out string) []float64 {
	t.Helper()
	var vals []float64
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var doc map[string]any
		if err := json.Unmarshal([]byte(l), &doc); err != nil {
			t.Fatal(err)
		}
		switch v := doc[metrics.PodStartupDuration].(type) {
		case float64:
			vals = append(vals, v)
		case []any:
			for _, x := range v {
				vals = append(vals, x.(float64))
			}
		}
	}
	slices.Sort(vals)
	return vals
}
