package kubelet_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/kubelet"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata/userdatatest"
)

var userData = userdatatest.NodeConfig{Cluster: "test", Flags: []string{`--node-labels="karpenter.sh/nodepool=default"`}}.Base64()

// Someone (the lifecycle, KWOK) writes the Node between its Create and the
// kubelet's status post, conflicts times in a row: the emulation re-reads the
// Node and posts again until it lands, keeping the other writer's change.
func TestStatusPostSurvivesConcurrentWriters(t *testing.T) {
	for _, conflicts := range []int{1, 6} {
		t.Run(fmt.Sprintf("%d conflicts", conflicts), func(t *testing.T) {
			kc := fake.NewClientset()
			nodesGVR := corev1.SchemeGroupVersion.WithResource("nodes")
			var posts atomic.Int64
			kc.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetSubresource() != "status" {
					return false, nil, nil
				}
				n := int(posts.Add(1))
				if n > conflicts {
					return false, nil, nil // the tracker stores it
				}
				// A concurrent writer labels the node first; the post made
				// from the older copy conflicts, as the API server answers.
				sent := a.(k8stesting.UpdateAction).GetObject().(*corev1.Node)
				cur, err := kc.Tracker().Get(nodesGVR, "", sent.Name)
				if err != nil {
					return true, nil, err
				}
				node := cur.(*corev1.Node).DeepCopy()
				node.Labels[fmt.Sprintf("writer-%d", n)] = "x"
				if err := kc.Tracker().Update(nodesGVR, node, ""); err != nil {
					return true, nil, err
				}
				return true, nil, apierrors.NewConflict(corev1.Resource("nodes"), sent.Name, fmt.Errorf("the object has been modified"))
			})
			e := kubelet.New(kubelet.Config{
				Client: kc, Region: "us-west-2", KubernetesVersion: "1.33",
				TypeInfo: func(string) (ec2types.InstanceTypeInfo, bool) {
					return ec2types.InstanceTypeInfo{InstanceType: "m5.large",
						VCpuInfo:   &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(2)},
						MemoryInfo: &ec2types.MemoryInfo{SizeInMiB: aws.Int64(8192)}}, true
				},
				After: func(_ time.Duration, f func()) { f() }, // register synchronously
			})
			inst := ec2types.Instance{InstanceId: aws.String("i-0abc"), InstanceType: "m5.large",
				PrivateDnsName:   aws.String("ip-10-0-0-1.us-west-2.compute.internal"),
				PrivateIpAddress: aws.String("10.0.0.1"),
				Placement:        &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a")}}
			e.Observe(inst, ec2types.InstanceStateNameRunning, userData)

			for _, ev := range e.Events() {
				if ev.Err != nil {
					t.Fatalf("emulation failed: %+v", ev)
				}
			}
			node, err := kc.CoreV1().Nodes().Get(t.Context(), *inst.PrivateDnsName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if node.Status.Allocatable.Cpu().IsZero() || node.Status.Capacity.Memory().IsZero() {
				t.Fatalf("node without capacity/allocatable after %d conflicts: %+v", conflicts, node.Status)
			}
			for i := 1; i <= conflicts; i++ {
				if node.Labels[fmt.Sprintf("writer-%d", i)] != "x" {
					t.Errorf("concurrent write %d undone by the status post: %v", i, node.Labels)
				}
			}
			if got := int(posts.Load()); got != conflicts+1 {
				t.Errorf("%d status posts, want %d", got, conflicts+1)
			}
		})
	}
}
