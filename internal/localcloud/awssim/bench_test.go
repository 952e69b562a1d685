package awssim

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// BenchmarkNew measures start-up with the embedded catalog (what the local
// cloud pays once).
func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		s, err := New(Options{ClusterName: "bench", KubernetesVersion: "1.36"})
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	}
}

// BenchmarkCreateFleet launches one instance per call through the real SDK
// client, choosing among 20 pools, and reports launches per second.
func BenchmarkCreateFleet(b *testing.B) {
	s, err := New(Options{ClusterName: "bench", KubernetesVersion: "1.36", Delays: Delays{Pending: time.Hour}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	c := ec2.NewFromConfig(s.ClientConfig())
	ami, _ := s.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	ctx := b.Context()
	if _, err := c.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String("bench"),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami)}}); err != nil {
		b.Fatal(err)
	}
	var ovs []types.FleetLaunchTemplateOverridesRequest
	for _, it := range []string{"m5.large", "m5.xlarge", "c5.large", "c5.xlarge", "r5.large"} {
		for _, z := range []string{"us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"} {
			ovs = append(ovs, override(it, z))
		}
	}
	in := fleetInput("bench", types.DefaultTargetCapacityTypeSpot, ovs...)
	start := time.Now()
	for b.Loop() {
		if _, err := c.CreateFleet(ctx, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "launches/s")
}
