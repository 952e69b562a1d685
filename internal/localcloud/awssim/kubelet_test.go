package awssim

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/kubelet"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata/userdatatest"
)

var al2023UserData = userdatatest.NodeConfig{Cluster: "test",
	Kubelet: map[string]any{"maxPods": 29, "kubeReserved": map[string]string{"cpu": "70m", "memory": "574Mi"}},
	Flags: []string{`--node-labels="karpenter.sh/nodepool=default,karpenter.sh/capacity-type=on-demand"`,
		`--register-with-taints="karpenter.sh/unregistered:NoExecute"`}}.Base64()

// The kubelet emulation's API-server side is checked against client-go's
// fake clientset here (pure unit); the localcloud harness test covers a real
// kube-apiserver + KWOK.
func TestKubeletRegistersAndRetiresNodes(t *testing.T) {
	for _, keep := range []bool{false, true} {
		s, cfg := newTestServer(t, func(o *Options) { o.KeepTerminatedNodes = keep })
		kc := fake.NewClientset()
		s.setKubeClient(kc)
		c := ec2.NewFromConfig(cfg)
		lt := launchTemplate(t, s, c, "nodes", al2023UserData)
		out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("fleet %+v %v", out, err)
		}
		id := out.Instances[0].InstanceIds[0]
		inst, _, _ := s.EC2().Instance(id)
		var node *corev1.Node
		eventually(t, "node registered", func() bool {
			node, err = kc.CoreV1().Nodes().Get(ctx(t), *inst.PrivateDnsName, metav1.GetOptions{})
			return err == nil && node.Status.Allocatable != nil
		})
		if node.Spec.ProviderID != "aws:///us-west-2a/"+id || node.Labels["karpenter.sh/nodepool"] != "default" ||
			node.Labels[corev1.LabelInstanceTypeStable] != "m5.large" || node.Labels[corev1.LabelTopologyZone] != "us-west-2a" ||
			node.Annotations[kubelet.KWOKAnnotation] != "fake" || len(node.Spec.Taints) != 1 || node.Spec.Taints[0].Key != "karpenter.sh/unregistered" {
			t.Fatalf("node %+v", node)
		}
		pods, cpu, mem := node.Status.Allocatable[corev1.ResourcePods], node.Status.Allocatable[corev1.ResourceCPU], node.Status.Allocatable[corev1.ResourceMemory]
		capMem := node.Status.Capacity[corev1.ResourceMemory]
		if pods.Value() != 29 || cpu.MilliValue() != 2000-70 || capMem.Value()-mem.Value() != (574+100)<<20 {
			t.Fatalf("allocatable %v capacity %v", node.Status.Allocatable, node.Status.Capacity)
		}
		if _, err := c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "node retired", func() bool {
			n, err := kc.CoreV1().Nodes().Get(ctx(t), *inst.PrivateDnsName, metav1.GetOptions{})
			if keep {
				return err == nil && n.Annotations[kubelet.KWOKAnnotation] == ""
			}
			return apierrors.IsNotFound(err)
		})
	}
}
