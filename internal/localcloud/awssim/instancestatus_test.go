package awssim

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// DescribeInstanceStatus through the SDK: a running instance passes both
// checks until a test fails one; then it is impaired since that time and
// the filter Karpenter-AWS v1.14.1 polls with (instance-status.status =
// impaired, providers/instancestatus) finds exactly it.
func TestDescribeInstanceStatus(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	var ids []string
	for range 2 {
		out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("fleet %+v %v", out, err)
		}
		ids = append(ids, out.Instances[0].InstanceIds[0])
	}
	eventually(t, "running", func() bool {
		for _, id := range ids {
			if inst, _, _ := s.EC2().Instance(id); inst.State.Name != types.InstanceStateNameRunning {
				return false
			}
		}
		return true
	})
	impaired := func(filter string) []types.InstanceStatus {
		t.Helper()
		out, err := c.DescribeInstanceStatus(ctx(t), &ec2.DescribeInstanceStatusInput{Filters: []types.Filter{{Name: aws.String(filter), Values: []string{"impaired"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return out.InstanceStatuses
	}
	if got := impaired("instance-status.status"); len(got) != 0 {
		t.Fatalf("healthy fleet reports %d impaired", len(got))
	}
	since := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	if err := s.EC2().FailStatusCheck(ids[1], false, since); err != nil {
		t.Fatal(err)
	}
	got := impaired("instance-status.status")
	if len(got) != 1 || aws.ToString(got[0].InstanceId) != ids[1] || got[0].InstanceStatus.Status != types.SummaryStatusImpaired ||
		len(got[0].InstanceStatus.Details) != 1 || got[0].InstanceStatus.Details[0].Status != types.StatusTypeFailed ||
		!aws.ToTime(got[0].InstanceStatus.Details[0].ImpairedSince).Equal(since) || got[0].SystemStatus.Status != types.SummaryStatusOk {
		t.Fatalf("impaired %+v", got)
	}
	if got := impaired("system-status.status"); len(got) != 0 {
		t.Errorf("an instance check failure shows as a system one: %+v", got)
	}
	all, err := c.DescribeInstanceStatus(ctx(t), &ec2.DescribeInstanceStatusInput{InstanceIds: ids})
	if err != nil || len(all.InstanceStatuses) != 2 {
		t.Fatalf("by id: %+v %v", all, err)
	}
	s.EC2().PassStatusChecks(ids[1])
	if got := impaired("instance-status.status"); len(got) != 0 {
		t.Errorf("passing again, still impaired: %+v", got)
	}
	if _, err := c.DescribeInstanceStatus(ctx(t), &ec2.DescribeInstanceStatusInput{InstanceIds: ids, MaxResults: aws.Int32(5)}); apiCode(err) != "InvalidParameterCombination" {
		t.Errorf("InstanceIds with MaxResults: %v", err)
	}
}
