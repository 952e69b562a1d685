package apis

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// mutateAll changes every settable scalar reachable from v (through
// pointers, structs, slices and maps). Applied to a deep copy, it must leave
// the original untouched.
func mutateAll(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			mutateAll(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				mutateAll(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := 0; i < v.Len(); i++ {
			mutateAll(v.Index(i))
		}
	case reflect.Map:
		if v.IsNil() {
			return
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			mutateAll(e)
			v.SetMapIndex(k, e)
		}
		if v.Type().Key().Kind() == reflect.String {
			v.SetMapIndex(reflect.ValueOf("added-by-mutation").Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
		}
	case reflect.String:
		if v.CanSet() {
			v.SetString(v.String() + "-mutated")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if v.CanSet() {
			v.SetInt(v.Int() + 1)
		}
	case reflect.Bool:
		if v.CanSet() {
			v.SetBool(!v.Bool())
		}
	}
}

func fullNodeClaim() *NodeClaim {
	now := metav1.NewTime(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	nc := &NodeClaim{
		ObjectMeta:    metav1.ObjectMeta{Name: "default-abc", Labels: map[string]string{NodePoolLabelKey: "default"}, Annotations: map[string]string{"a": "b"}},
		NodePoolHash:  "1",
		NodeClassHash: "2",
		Spec: NodeClaimSpec{
			Requirements:           []NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}, MinValues: ptr(2)}},
			Taints:                 []corev1.Taint{{Key: "t", Value: "v", Effect: corev1.TaintEffectNoSchedule, TimeAdded: &now}},
			StartupTaints:          []corev1.Taint{{Key: "s", Effect: corev1.TaintEffectNoExecute}},
			Resources:              ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("1")}},
			NodeClassRef:           &NodeClassReference{Group: AWSGroup, Kind: EC2NodeClassKind, Name: "default"},
			ExpireAfter:            DurationOf(time.Hour),
			TerminationGracePeriod: &metav1.Duration{Duration: time.Minute},
		},
		Status: NodeClaimStatus{
			ProviderID: "aws:///us-west-2a/i-1", InstanceID: "i-1", NodeName: "n", ImageID: "ami-1",
			Capacity:         corev1.ResourceList{"cpu": resource.MustParse("2")},
			Allocatable:      corev1.ResourceList{"cpu": resource.MustParse("1900m")},
			Conditions:       []metav1.Condition{{Type: ConditionLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: now}},
			LastPodEventTime: now,
		},
	}
	return nc
}

func TestDeepCopy(t *testing.T) {
	cfg, err := LoadData("full.yaml", []byte(pool+"---\n"+edit(class, "  kubelet:\n    maxPods: 110\n", `  kubelet:
    maxPods: 110
    clusterDNS: [10.100.0.10]
    podsPerCore: 2
    systemReserved: {cpu: 100m}
    kubeReserved: {memory: 100Mi}
    evictionHard: {memory.available: 5%}
    evictionSoft: {memory.available: 10%}
    evictionSoftGracePeriod: {memory.available: 1m}
    evictionMaxPodGracePeriod: 30
    imageGCHighThresholdPercent: 80
    imageGCLowThresholdPercent: 60
    cpuCFSQuota: true
  amiFamily: AL2023
  userData: "#!/bin/bash"
  tags: {team: a}
  associatePublicIPAddress: false
  detailedMonitoring: true
  instanceStorePolicy: RAID0
  context: ctx
`)))
	if err != nil {
		t.Fatal(err)
	}
	objects := []any{cfg.NodePools[0], cfg.NodeClasses[0], fullNodeClaim()}
	for _, obj := range objects {
		before, _ := json.Marshal(obj)
		var cp any
		switch o := obj.(type) {
		case *NodePool:
			cp = o.DeepCopy()
		case *EC2NodeClass:
			cp = o.DeepCopy()
		case *NodeClaim:
			cp = o.DeepCopy()
		}
		if !equality.Semantic.DeepEqual(obj, cp) {
			t.Errorf("%T: copy differs from the original", obj)
		}
		mutateAll(reflect.ValueOf(cp))
		after, _ := json.Marshal(obj)
		if string(before) != string(after) {
			t.Errorf("%T: mutating the copy changed the original:\n%s\n%s", obj, before, after)
		}
		if equality.Semantic.DeepEqual(obj, cp) {
			t.Errorf("%T: mutation did not reach the copy (test is not effective)", obj)
		}
	}
	var nilPool *NodePool
	if nilPool.DeepCopy() != nil || (*EC2NodeClass)(nil).DeepCopy() != nil || (*NodeClaim)(nil).DeepCopy() != nil || (*KubeletConfiguration)(nil).DeepCopy() != nil {
		t.Error("nil DeepCopy not nil")
	}
}
