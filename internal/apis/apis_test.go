package apis

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNillableDurationJSON(t *testing.T) {
	cases := []struct {
		in   string
		want NillableDuration
		out  string
	}{
		{`"720h"`, DurationOf(720 * time.Hour), `"720h0m0s"`},
		{`"1h30m"`, DurationOf(90 * time.Minute), `"1h30m0s"`},
		{`"0s"`, DurationOf(0), `"0s"`},
		{`"Never"`, NeverDuration(), `"Never"`},
		{`null`, NillableDuration{}, `null`},
	}
	for _, tc := range cases {
		var got NillableDuration
		if err := json.Unmarshal([]byte(tc.in), &got); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got.String() != tc.want.String() || got.Never != tc.want.Never || got.IsZero() != tc.want.IsZero() {
			t.Errorf("%s: got %+v want %+v", tc.in, got, tc.want)
		}
		out, _ := json.Marshal(got)
		if string(out) != tc.out {
			t.Errorf("%s: marshal %s want %s", tc.in, out, tc.out)
		}
	}
	for _, bad := range []string{`"30d"`, `"1.5h"`, `"-1h"`, `"never"`, `"500ms"`, `5`, `""`} {
		var got NillableDuration
		if err := json.Unmarshal([]byte(bad), &got); err == nil {
			t.Errorf("%s accepted as %v", bad, got)
		}
	}
	// omitzero leaves an unset value out of the encoded NodePool.
	b, _ := json.Marshal(NodeClaimTemplateSpec{})
	if strings.Contains(string(b), "expireAfter") {
		t.Errorf("unset expireAfter encoded: %s", b)
	}
}

func TestBudgetIsActiveAndNodeLimit(t *testing.T) {
	sched := "0 9 * * mon-fri"
	b := Budget{Nodes: "0", Schedule: &sched, Duration: &metav1.Duration{Duration: 8 * time.Hour}}
	mon10 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	sun10 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if ok, err := b.IsActive(mon10); err != nil || !ok {
		t.Errorf("Monday 10:00: %v %v", ok, err)
	}
	if ok, err := b.IsActive(sun10); err != nil || ok {
		t.Errorf("Sunday 10:00: %v %v", ok, err)
	}
	if ok, _ := (Budget{Nodes: "10%"}).IsActive(sun10); !ok {
		t.Error("unscheduled budget inactive")
	}
	bad := "0 25 * * *"
	if _, err := (Budget{Nodes: "1", Schedule: &bad, Duration: b.Duration}).IsActive(mon10); err == nil {
		t.Error("bad schedule accepted")
	}
	if _, err := (Budget{Nodes: "1", Schedule: &sched}).IsActive(mon10); err == nil {
		t.Error("schedule without duration accepted")
	}

	limits := []struct {
		nodes string
		total int
		want  int
	}{{"10%", 5, 1}, {"10%", 0, 0}, {"10%", 10, 1}, {"10%", 11, 2}, {"100%", 7, 7}, {"0", 9, 0}, {"3", 9, 3}, {"0%", 9, 0}}
	for _, l := range limits {
		got, err := Budget{Nodes: l.nodes}.NodeLimit(l.total)
		if err != nil || got != l.want {
			t.Errorf("NodeLimit(%s of %d) = %d, %v; want %d", l.nodes, l.total, got, err, l.want)
		}
	}
	if _, err := (Budget{Nodes: "101%"}).NodeLimit(3); err == nil {
		t.Error("101% accepted")
	}

	d := Disruption{Budgets: []Budget{
		{Nodes: "20%"},
		b, // 0 during business hours
		{Nodes: "1", Reasons: []DisruptionReason{DisruptionReasonDrifted}},
	}}
	check := func(now time.Time, r DisruptionReason, want int) {
		t.Helper()
		got, err := d.AllowedDisruptions(now, r, 10)
		if err != nil || got != want {
			t.Errorf("AllowedDisruptions(%s, %s) = %d, %v; want %d", now.Weekday(), r, got, err, want)
		}
	}
	check(mon10, DisruptionReasonEmpty, 0)
	check(sun10, DisruptionReasonEmpty, 2)
	check(sun10, DisruptionReasonDrifted, 1)
	if got, _ := (Disruption{}).AllowedDisruptions(sun10, DisruptionReasonEmpty, 4); got != 4 {
		t.Errorf("no budgets: %d", got)
	}
}

func basePool() *NodePool {
	np := &NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.ObjectMeta.Labels = map[string]string{"team": "a", "env": "prod"}
	np.Spec.Template.Spec.Requirements = []NodeSelectorRequirementWithMinValues{{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}}
	np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}, {Key: "b", Value: "x", Effect: corev1.TaintEffectNoExecute}}
	np.Spec.Template.Spec.NodeClassRef = &NodeClassReference{Name: "default"}
	np.SetDefaults()
	return np
}

// checkHash applies each change to a fresh object: the same changes must
// keep its hash, the differ changes must change it.
func checkHash[T interface{ Hash() string }](t *testing.T, fresh func() T, same, differ []func(T)) {
	t.Helper()
	h := fresh().Hash()
	for i, mut := range same {
		obj := fresh()
		mut(obj)
		if obj.Hash() != h {
			t.Errorf("change %d (excluded from the hash) changed it", i)
		}
	}
	for i, mut := range differ {
		obj := fresh()
		mut(obj)
		if obj.Hash() == h {
			t.Errorf("change %d did not change the hash", i)
		}
	}
}

// jsonRoundTrip encodes a claim as the store does and decodes it back.
func jsonRoundTrip(t *testing.T, nc *NodeClaim) (NodeClaim, []byte) {
	t.Helper()
	b, err := json.Marshal(nc)
	if err != nil {
		t.Fatal(err)
	}
	var back NodeClaim
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return back, b
}

func TestNodePoolHash(t *testing.T) {
	h := basePool().Hash()
	if h == "" || h != basePool().Hash() {
		t.Fatal("hash not stable")
	}
	same := []func(*NodePool){
		func(np *NodePool) { np.Spec.Weight = ptr(int32(7)) },
		func(np *NodePool) { np.Spec.Limits = Limits{"cpu": resource.MustParse("10")} },
		func(np *NodePool) { np.Spec.Disruption.ConsolidateAfter = NeverDuration() },
		func(np *NodePool) { np.Spec.Disruption.Budgets = []Budget{{Nodes: "0"}} },
		func(np *NodePool) { np.Spec.Template.Spec.Requirements = nil },
		func(np *NodePool) {
			ts := np.Spec.Template.Spec.Taints
			ts[0], ts[1] = ts[1], ts[0]
		},
	}
	differ := []func(*NodePool){
		func(np *NodePool) { np.Spec.Template.ObjectMeta.Labels["team"] = "b" },
		func(np *NodePool) { np.Spec.Template.ObjectMeta.Annotations = map[string]string{"x": "y"} },
		func(np *NodePool) { np.Spec.Template.Spec.Taints[0].Value = "v" },
		func(np *NodePool) {
			np.Spec.Template.Spec.StartupTaints = []corev1.Taint{{Key: "s", Effect: corev1.TaintEffectNoSchedule}}
		},
		func(np *NodePool) { np.Spec.Template.Spec.NodeClassRef.Name = "other" },
		func(np *NodePool) { np.Spec.Template.Spec.ExpireAfter = NeverDuration() },
		func(np *NodePool) {
			np.Spec.Template.Spec.TerminationGracePeriod = &metav1.Duration{Duration: time.Hour}
		},
	}
	checkHash(t, basePool, same, differ)
}

func baseClass() *EC2NodeClass {
	nc := &EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	nc.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "al2023@latest"}}
	nc.Spec.Role = "r"
	nc.Spec.SubnetSelectorTerms = []SubnetSelectorTerm{{Tags: map[string]string{"k": "v"}}}
	nc.Spec.SecurityGroupSelectorTerms = []SecurityGroupSelectorTerm{{Tags: map[string]string{"k": "v"}}}
	nc.Spec.Tags = map[string]string{"a": "1", "b": "2"}
	nc.SetDefaults()
	return nc
}

func TestEC2NodeClassHash(t *testing.T) {
	same := []func(*EC2NodeClass){
		func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms = []SubnetSelectorTerm{{ID: "subnet-1"}} },
		func(nc *EC2NodeClass) { nc.Spec.SecurityGroupSelectorTerms = nil },
		func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "al2023@v20240625"}} },
		// Spelling the same family via amiFamily is not drift.
		func(nc *EC2NodeClass) { nc.Spec.AMIFamily = ptr(AMIFamilyAL2023) },
	}
	differ := []func(*EC2NodeClass){
		func(nc *EC2NodeClass) { nc.Spec.Tags["a"] = "3" },
		func(nc *EC2NodeClass) { nc.Spec.UserData = ptr("#!/bin/bash") },
		func(nc *EC2NodeClass) { nc.Spec.MetadataOptions.HTTPTokens = ptr("optional") },
		func(nc *EC2NodeClass) { nc.Spec.Kubelet = &KubeletConfiguration{MaxPods: ptr(int32(20))} },
		func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "bottlerocket@latest"}} },
		func(nc *EC2NodeClass) { nc.Spec.Role = "other" },
		func(nc *EC2NodeClass) { nc.Spec.DetailedMonitoring = ptr(true) },
		func(nc *EC2NodeClass) {
			nc.Spec.BlockDeviceMappings = []*BlockDeviceMapping{{DeviceName: ptr("/dev/xvda"), EBS: &BlockDevice{VolumeSize: ptr(resource.MustParse("20Gi"))}}}
		},
	}
	checkHash(t, baseClass, same, differ)
}

func TestProgrammaticValidate(t *testing.T) {
	if err := basePool().Validate(); err != nil {
		t.Errorf("base pool: %v", err)
	}
	if err := baseClass().Validate(); err != nil {
		t.Errorf("base class: %v", err)
	}
	np := basePool()
	np.Spec.Template.Spec.Requirements[0].Operator = "Ge"
	np.Spec.Template.Spec.ExpireAfter = DurationOf(1500 * time.Millisecond)
	want := `spec.template.spec.requirements[0].operator: "Ge" is not one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte` + "\n" +
		`spec.template.spec.expireAfter: 1.5s must be whole seconds (e.g. 30s, 5m, 1h)`
	if err := np.Validate(); err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestNodeClaimConditions(t *testing.T) {
	nc := &NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{NodePoolLabelKey: "default"}}}
	t0 := metav1.NewTime(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	nc.SetCondition(ConditionLaunched, metav1.ConditionTrue, "Launched", "", t0)
	nc.SetCondition(ConditionLaunched, metav1.ConditionTrue, "Launched", "again", t1)
	if c := nc.Condition(ConditionLaunched); c == nil || !c.LastTransitionTime.Equal(&t0) || c.Message != "again" {
		t.Errorf("condition %+v", c)
	}
	if !nc.IsTrue(ConditionLaunched) || nc.IsTrue(ConditionRegistered) {
		t.Error("IsTrue wrong")
	}
	nc.SetCondition(ConditionLaunched, metav1.ConditionFalse, "Gone", "", t1)
	if c := nc.Condition(ConditionLaunched); !c.LastTransitionTime.Equal(&t1) {
		t.Errorf("transition time not updated: %+v", c)
	}
	nc.ClearCondition(ConditionLaunched)
	if nc.Condition(ConditionLaunched) != nil {
		t.Error("not cleared")
	}
	if nc.NodePoolName() != "default" {
		t.Error("NodePoolName")
	}
	// The record round-trips through JSON (DynamoDB stores it that way).
	nc.Spec.ExpireAfter = DurationOf(720 * time.Hour)
	nc.Status.Capacity = corev1.ResourceList{"cpu": resource.MustParse("2")}
	nc.NodePoolHash = "123"
	back, b := jsonRoundTrip(t, nc)
	if d, _ := back.Spec.ExpireAfter.Get(); d != 720*time.Hour || back.NodePoolHash != "123" || back.Status.Capacity.Cpu().String() != "2" {
		t.Errorf("round trip: %s", b)
	}
}
