package provisioning_test

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// A Windows pod (nodeSelector kubernetes.io/os: windows) on a NodePool of a
// windows2022@latest class: the provisioner launches the EKS-optimized
// Windows Server 2022 image with PowerShell user data, the instance
// registers as a Windows node (os windows, build 10.0.20348), and the pod
// runs there once registration lifts the unregistered taint.
func TestWindowsPodRunsOnWindowsNode(t *testing.T) {
	h := newHarness(t, poolSpec{alias: "windows2022@latest"})
	sel := map[string]string{"nodewright.io/test": h.pool, corev1.LabelOSStable: "windows"}
	pod := cloudtest.PausePod(h.ns, "win-0", "win", sel, "500m", "256Mi")
	if _, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Create(h.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cloudtest.WaitUnschedulable(h.ctx, t, h.cloud.KubeClient, h.ns, "app=win", 1, 30*time.Second)
	if res := h.run(h.deps(nil)); len(res.Launched) != 1 {
		t.Fatalf("want one launch, got %+v", res)
	}
	cls := h.claims()
	if len(cls) != 1 || cls[0].Labels[corev1.LabelOSStable] != "windows" || cls[0].Labels[corev1.LabelWindowsBuild] != "10.0.20348" {
		t.Fatalf("claims %d, labels %v", len(cls), cls[0].Labels)
	}
	checkWindowsInstance(t, h, cls[0])
	node := waitNode(t, h, cls[0])
	if node.Labels[corev1.LabelOSStable] != "windows" || node.Labels[corev1.LabelWindowsBuild] != "10.0.20348" ||
		node.Status.NodeInfo.OperatingSystem != "windows" || node.Labels[apis.NodePoolLabelKey] != h.pool {
		t.Errorf("node labels %v, os %q", node.Labels, node.Status.NodeInfo.OperatingSystem)
	}
	// What the lifecycle does on registration; then the pod runs there.
	if _, err := h.kube.RemoveTaints(h.ctx, node.Name, apis.UnregisteredTaintKey, ""); err != nil {
		t.Fatal(err)
	}
	h.eventually("the windows pod running on the windows node", 60*time.Second, func() (bool, string) {
		p, err := h.cloud.KubeClient.CoreV1().Pods(h.ns).Get(h.ctx, "win-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Spec.NodeName == node.Name && p.Status.Phase == corev1.PodRunning, fmt.Sprintf("on %q phase %s", p.Spec.NodeName, p.Status.Phase)
	})
}

// checkWindowsInstance: the claim's instance runs the Windows image and
// was given the Start-EKSBootstrap.ps1 user data.
func checkWindowsInstance(t *testing.T, h *harness, cl *apis.NodeClaim) {
	t.Helper()
	insts := h.instances()[cl.Name]
	if len(insts) != 1 {
		t.Fatalf("claim %s has %d instances", cl.Name, len(insts))
	}
	inst := insts[0]
	img, ok := h.sim.EC2().Image(sdkaws.ToString(inst.ImageId))
	if !ok || !strings.HasPrefix(sdkaws.ToString(img.Name), "Windows_Server-2022-English-Core-EKS_Optimized-") || inst.Platform != ec2types.PlatformValuesWindows {
		t.Errorf("instance %s: image %s (%s), platform %q", sdkaws.ToString(inst.InstanceId), sdkaws.ToString(inst.ImageId), sdkaws.ToString(img.Name), inst.Platform)
	}
	raw, err := base64.StdEncoding.DecodeString(h.sim.EC2().UserData(sdkaws.ToString(inst.InstanceId)))
	if err != nil || !strings.HasPrefix(string(raw), "<powershell>") || !strings.Contains(string(raw), "Start-EKSBootstrap.ps1") {
		t.Errorf("user data (%v):\n%s", err, raw)
	}
}

// waitNode waits for the Node of the claim's instance.
func waitNode(t *testing.T, h *harness, cl *apis.NodeClaim) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	h.eventually("node registration", 30*time.Second, func() (bool, string) {
		nodes, err := h.cloud.KubeClient.CoreV1().Nodes().List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		for i := range nodes.Items {
			if nodes.Items[i].Spec.ProviderID == cl.Status.ProviderID {
				node = &nodes.Items[i]
				return true, ""
			}
		}
		return false, "no node with providerID " + cl.Status.ProviderID
	})
	return node
}
