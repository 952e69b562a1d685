package kube

import (
	"reflect"
	"testing"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Each CSINode driver's allocatable count is a limit; a driver without
// allocatable or without a count has none.
func TestSnapshotVolumeLimits(t *testing.T) {
	c10, c0 := int32(10), int32(0)
	s := &Snapshot{CSINodes: []*storagev1.CSINode{
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{
			{Name: "ebs.csi.aws.com", Allocatable: &storagev1.VolumeNodeResources{Count: &c10}},
			{Name: "efs.csi.aws.com"},
			{Name: "other", Allocatable: &storagev1.VolumeNodeResources{}},
			{Name: "none", Allocatable: &storagev1.VolumeNodeResources{Count: &c0}},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	}}
	want := map[string]map[string]int{"a": {"ebs.csi.aws.com": 10, "none": 0}}
	if got := s.VolumeLimits(); !reflect.DeepEqual(got, want) {
		t.Errorf("volume limits %v, want %v", got, want)
	}
}
