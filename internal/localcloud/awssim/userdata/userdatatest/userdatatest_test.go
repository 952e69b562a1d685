package userdatatest_test

import (
	"reflect"
	"testing"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata/userdatatest"
)

// The simulator reads back what the tests write.
func TestRoundTrip(t *testing.T) {
	nc := userdatatest.NodeConfig{Cluster: "c", Kubelet: map[string]any{"maxPods": 29, "kubeReserved": map[string]string{"cpu": "70m"}},
		Flags: []string{`--node-labels="a=b,c=d"`, `--register-with-taints="t:NoExecute"`}}
	got, err := userdata.ParseBase64(nc.Base64())
	if err != nil {
		t.Fatal(err)
	}
	if got.Format != userdata.FormatAL2023 || got.ClusterName != "c" || got.MaxPods != 29 ||
		!reflect.DeepEqual(got.Labels, map[string]string{"a": "b", "c": "d"}) || len(got.Taints) != 1 || got.KubeReserved["cpu"] != "70m" {
		t.Fatalf("parsed %+v", got)
	}
}
