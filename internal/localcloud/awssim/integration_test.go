package awssim_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/userdata/userdatatest"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

var nodeUserData = userdatatest.NodeConfig{Cluster: "it", Kubelet: map[string]any{"maxPods": 29},
	Flags: []string{"--node-labels=karpenter.sh/nodepool=default"}}.Base64()

// A CreateFleet instance becomes a Ready KWOK node that runs pods, and its
// Node goes away when the instance terminates, on a real kube-apiserver.
func TestInstanceBecomesReadyKWOKNode(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs the local control plane (skipped in -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute) // a cold control-plane build
	defer cancel()
	sim, err := awssim.New(awssim.Options{ClusterName: "it", KubernetesVersion: "1.36", Seed: 1, TimeScale: 10,
		Delays: awssim.Delays{Pending: 5 * time.Second, NodeRegistration: 5 * time.Second, ShuttingDown: 5 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	plane, err := kubeplane.Start(ctx, kubeplane.Options{TokenWebhookURL: sim.TokenReviewURL()})
	if err != nil {
		t.Fatal(err)
	}
	defer plane.Close()
	sim.SetEKSCluster(plane.Endpoint, plane.CAData, "1.36")
	if err := sim.SetKube(plane.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	kc := plane.Client()

	c := ec2.NewFromConfig(sim.ClientConfig())
	ami, _ := sim.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("it-nodes"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami), UserData: aws.String(nodeUserData)}}); err != nil {
		t.Fatal(err)
	}
	out, err := c.CreateFleet(ctx, &ec2.CreateFleetInput{Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String("it-nodes"), Version: aws.String("$Latest")},
			Overrides:                   []types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", AvailabilityZone: aws.String("us-west-2a")}}}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeOnDemand}})
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("fleet %+v %v", out, err)
	}
	inst, _, _ := sim.EC2().Instance(out.Instances[0].InstanceIds[0])
	name := *inst.PrivateDnsName

	waitFor(t, "Ready node", func() bool {
		n, err := kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return err == nil && kubeplane.NodeReady(n) && n.Labels["karpenter.sh/nodepool"] == "default" && n.Status.Allocatable.Pods().Value() == 29
	})
	ns := plane.NewNamespace(t)
	if _, err := kc.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "pod running on the node", func() bool {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning
	})
	if _, err := c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{*inst.InstanceId}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node deleted", func() bool {
		_, err := kc.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	for _, ev := range sim.KubeletEvents() {
		if ev.Err != nil {
			t.Errorf("kubelet emulation: %s %s: %v", ev.Action, ev.NodeName, ev.Err)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("timed out waiting for %s: %v", what, err)
	}
}
