package wire

import (
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestDecodeNestedLists(t *testing.T) {
	form, _ := url.ParseQuery("Action=CreateFleet&Type=instant&ClientToken=tok" +
		"&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=lt" +
		"&LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large&LaunchTemplateConfigs.1.Overrides.1.Priority=1.5" +
		"&LaunchTemplateConfigs.1.Overrides.2.InstanceType=c5.large" +
		"&TagSpecification.1.ResourceType=instance&TagSpecification.1.Tag.1.Key=k&TagSpecification.1.Tag.1.Value=v" +
		"&TargetCapacitySpecification.TotalTargetCapacity=3&TargetCapacitySpecification.DefaultTargetCapacityType=spot")
	var in ec2.CreateFleetInput
	if err := Decode(form, &in); err != nil {
		t.Fatal(err)
	}
	ovs := in.LaunchTemplateConfigs[0].Overrides
	if aws.ToString(in.ClientToken) != "tok" || in.Type != types.FleetTypeInstant || len(ovs) != 2 || ovs[1].InstanceType != "c5.large" ||
		aws.ToFloat64(ovs[0].Priority) != 1.5 || aws.ToString(in.TagSpecifications[0].Tags[0].Value) != "v" ||
		aws.ToInt32(in.TargetCapacitySpecification.TotalTargetCapacity) != 3 {
		t.Fatalf("decoded %+v", in)
	}
	bad, _ := url.ParseQuery("TargetCapacitySpecification.TotalTargetCapacity=three")
	if err := Decode(bad, &ec2.CreateFleetInput{}); err == nil || !strings.Contains(err.Error(), "TotalTargetCapacity") {
		t.Fatalf("bad integer: %v", err)
	}
}

func TestEncodeUsesEC2Names(t *testing.T) {
	out := &ec2.DescribeInstancesOutput{Reservations: []types.Reservation{{Instances: []types.Instance{{
		InstanceId: aws.String("i-1"), State: &types.InstanceState{Name: types.InstanceStateNameRunning, Code: aws.Int32(16)},
		Tags: []types.Tag{{Key: aws.String("a&b"), Value: aws.String("<v>")}}}}}}}
	s := string(EncodeResponse("DescribeInstances", "req-1", out))
	for _, want := range []string{`<DescribeInstancesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">`, "<requestId>req-1</requestId>",
		"<reservationSet><item><instancesSet><item><instanceId>i-1</instanceId>", "<instanceState><code>16</code><name>running</name></instanceState>",
		"<tagSet><item><key>a&amp;b</key><value>&lt;v&gt;</value></item></tagSet>"} {
		if !strings.Contains(s, want) {
			t.Errorf("missing %s in\n%s", want, s)
		}
	}
}
