package demo

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localrun"
)

func TestResultLine(t *testing.T) {
	r := Result{Pods: 10, Running: 10, Nodes: 2, CostPerHour: 0.28356, TimeToRunning: 20540 * time.Millisecond, ScaleDown: 14900 * time.Millisecond, IAM: "enforced",
		Faults: "cold_start:0.05,duplicate:0.05,event_delay_s:1.0,shuffle:on", Lambda: localrun.LambdaStats{Throttles: 3, Retries: 1, ColdStarts: 4, Duplicates: 2, Delayed: 5}}
	want := "DEMO OK pods=10 running=10 nodes=2 cost_per_hour=0.2836 time_to_running_s=20.5 scale_down_s=14.9 " +
		"faults=cold_start:0.05,duplicate:0.05,event_delay_s:1.0,shuffle:on lambda=throttles:3,retries:1,expired:0,timeouts:0,cold_starts:4,duplicates:2,delayed:5 " +
		"iam=enforced denied=0"
	if got := r.Line(); got != want {
		t.Fatalf("Line() = %q, want %q", got, want)
	}
	if !demoLine.MatchString(want) {
		t.Fatalf("the e2e test's pattern rejects %q", want)
	}
}

func TestCountPods(t *testing.T) {
	now := metav1.Now()
	unsched := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable}
	pods := []corev1.Pod{
		{}, // just created
		{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{unsched}}},
		{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodPending}},
		{Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}, Spec: corev1.PodSpec{NodeName: "n"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
	}
	got := countPods(pods)
	want := podCounts{Total: 5, New: 1, Unschedulable: 1, Starting: 1, Running: 1, Terminating: 1}
	if got != want {
		t.Fatalf("countPods = %+v, want %+v", got, want)
	}
}

func TestDemoConfigLoads(t *testing.T) {
	for _, policy := range []string{"", string(apis.ConsolidationPolicyWhenEmptyOrUnderutilized)} {
		dir := t.TempDir()
		if err := writeConfig(dir, "c1", policy); err != nil {
			t.Fatal(err)
		}
		cfg, err := apis.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		np, nc := cfg.NodePool("default"), cfg.NodeClass("default")
		if np == nil || nc == nil {
			t.Fatalf("default pair missing: %+v", cfg)
		}
		wantPolicy := apis.ConsolidationPolicyWhenEmpty
		if policy != "" {
			wantPolicy = apis.ConsolidationPolicy(policy)
		}
		after, _ := np.Spec.Disruption.ConsolidateAfter.Get()
		if np.Spec.Disruption.ConsolidationPolicy != wantPolicy || after != ConsolidateAfter {
			t.Errorf("policy %s after %s", np.Spec.Disruption.ConsolidationPolicy, after)
		}
		if nc.Spec.Role != "KarpenterNodeRole-c1" || nc.Spec.SubnetSelectorTerms[0].Tags["karpenter.sh/discovery"] != "c1" {
			t.Errorf("node class not templated for the cluster: %+v", nc.Spec)
		}
	}
	if _, err := inflateDeployment(); err != nil {
		t.Fatal(err)
	}
}
