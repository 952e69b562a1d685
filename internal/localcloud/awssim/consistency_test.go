package awssim

import (
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestLostResponseTakesEffect: a LoseResponse fault serves the call and
// answers with the error; a retry with the same ClientToken and input gets
// the original fleet back, so exactly one instance exists.
func TestLostResponseTakesEffect(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	s.InjectFault(Fault{Service: "ec2", Operation: "CreateFleet", Code: "InternalError", Message: "lost",
		Status: http.StatusInternalServerError, Times: 1, LoseResponse: true})
	in := fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))
	in.ClientToken = aws.String("lost-1")
	if _, err := c.CreateFleet(ctx(t), in); apiCode(err) != "InternalError" {
		t.Fatalf("lost call: %v, want InternalError", err)
	}
	if n := len(s.EC2().Instances()); n != 1 {
		t.Fatalf("%d instances after the lost call, want 1", n)
	}
	out, err := c.CreateFleet(ctx(t), in) // the caller's retry
	if err != nil {
		t.Fatal(err)
	}
	calls := s.Calls("ec2", "CreateFleet")
	if len(calls) != 2 || calls[0].ErrorCode != "InternalError" || calls[1].ErrorCode != "" {
		t.Fatalf("calls %+v, want the lost one then the replayed one", calls)
	}
	if n := len(s.EC2().Instances()); n != 1 || out.Instances[0].InstanceIds[0] != *s.EC2().Instances()[0].InstanceId {
		t.Fatalf("%d instances, want the one the lost call launched", n)
	}
}

// TestHideNewInstances: instances launched while HideNewInstances(n) is set
// miss their first n DescribeInstances calls; earlier ones are unaffected.
func TestHideNewInstances(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	if _, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))); err != nil {
		t.Fatal(err)
	}
	s.EC2().HideNewInstances(2)
	if _, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))); err != nil {
		t.Fatal(err)
	}
	s.EC2().HideNewInstances(0)
	count := func() int {
		out, err := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range out.Reservations {
			n += len(r.Instances)
		}
		return n
	}
	for i, want := range []int{1, 1, 2, 2} {
		if got := count(); got != want {
			t.Fatalf("describe %d: %d instances, want %d", i+1, got, want)
		}
	}
}

// TestRuleLaunchConsistency (rule launch-consistency): for Delays.Consistency
// after a launch, DescribeInstances by id and TerminateInstances answer
// InvalidInstanceID.NotFound and a filtered DescribeInstances leaves the
// instance out; afterwards all three see it.
func TestRuleLaunchConsistency(t *testing.T) {
	s, cfg := newTestServer(t, func(o *Options) { o.Delays.Consistency = 100 * time.Second }) // 1 s at TimeScale 100
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-consistency", "")
	out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("launch: %+v %v", out, err)
	}
	id := out.Instances[0].InstanceIds[0]
	if _, err := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("describe by id right after the launch: %v, want InvalidInstanceID.NotFound", err)
	}
	listed := func() int {
		got, err := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}}}})
		if err != nil {
			t.Fatal(err)
		}
		return len(got.Reservations)
	}
	if n := listed(); n != 0 {
		t.Errorf("a filtered describe right after the launch lists %d instances, want 0", n)
	}
	if _, err := c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); apiCode(err) != "InvalidInstanceID.NotFound" {
		t.Errorf("terminate right after the launch: %v, want InvalidInstanceID.NotFound", err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for listed() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the instance never became visible")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Errorf("terminate once visible: %v", err)
	}
}
