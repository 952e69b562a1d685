package awssim

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/eventsim"
)

// An instance of an interruptible Capacity Reservation is taken back as
// the EC2 User Guide's "Monitor interruptible Capacity Reservations with
// EventBridge and CloudTrail" describes: the warning (its detail as the
// page shows it) and the termination two minutes later. An instance in no
// reservation, or in one that is not interruptible, cannot be.
func TestReclaimCapacityReservation(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	q := sqs.NewFromConfig(cfg)
	qu, _ := q.CreateQueue(ctx(t), &sqs.CreateQueueInput{QueueName: aws.String("interruption")})
	if _, err := s.Events().PutRule("cr", `{"source":["aws.ec2"],"detail-type":["`+DetailCapacityReservationWarning+`"]}`); err != nil {
		t.Fatal(err)
	}
	if err := s.Events().PutTargets("cr", eventsim.Target{Id: "q", Arn: s.SQS().QueueARN("interruption")}); err != nil {
		t.Fatal(err)
	}
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "nodes", "")
	launch := func() string {
		out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("fleet %+v %v", out, err)
		}
		return out.Instances[0].InstanceIds[0]
	}
	plain := launch()
	if err := s.ReclaimCapacityReservation(plain); err == nil {
		t.Error("an instance in no reservation was reclaimed")
	}
	s.EC2().AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: "us-west-2a", Count: 1, Open: true, Interruptible: true})
	id := launch()
	start := time.Now()
	if err := s.ReclaimCapacityReservation(id); err != nil {
		t.Fatal(err)
	}
	r, err := q.ReceiveMessage(ctx(t), &sqs.ReceiveMessageInput{QueueUrl: qu.QueueUrl, WaitTimeSeconds: 5})
	if err != nil || len(r.Messages) != 1 {
		t.Fatalf("no warning: %+v %v", r, err)
	}
	var ev struct {
		DetailType string            `json:"detail-type"`
		Resources  []string          `json:"resources"`
		Time       time.Time         `json:"time"`
		Detail     map[string]string `json:"detail"`
	}
	if err := json.Unmarshal([]byte(*r.Messages[0].Body), &ev); err != nil {
		t.Fatal(err)
	}
	d := ev.Detail
	at, err := time.Parse(time.RFC3339, d["instance-termination-time"])
	if ev.DetailType != DetailCapacityReservationWarning || d["instance-id"] != id || d["instance-action"] != "terminate" ||
		d["azId"] != "usw2-az1" || len(ev.Resources) != 1 || err != nil || at.Sub(ev.Time) < 119*time.Second || at.Sub(ev.Time) > 121*time.Second {
		t.Fatalf("event %s", *r.Messages[0].Body)
	}
	eventually(t, "terminated", func() bool {
		inst, _, _ := s.EC2().Instance(id)
		return inst.State.Name == types.InstanceStateNameTerminated
	})
	// 120 s at TimeScale 100 is 1.2 s: not before.
	if time.Since(start) < time.Second {
		t.Errorf("terminated %s after the warning, want the two-minute notice", time.Since(start))
	}
}
