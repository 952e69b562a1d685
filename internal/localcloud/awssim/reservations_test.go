package awssim

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// reservedTemplate creates a template that targets reservation id.
func reservedTemplate(t *testing.T, s *Server, c *ec2.Client, name, id string) string {
	t.Helper()
	return templateWith(t, s, c, name, func(d *types.RequestLaunchTemplateData) {
		d.CapacityReservationSpecification = &types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &types.CapacityReservationTarget{CapacityReservationId: aws.String(id)}}
	})
}

// templateWith creates a template of the AL2023 image, edited by edit.
func templateWith(t *testing.T, s *Server, c *ec2.Client, name string, edit func(*types.RequestLaunchTemplateData)) string {
	t.Helper()
	ami, _ := s.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	data := &types.RequestLaunchTemplateData{ImageId: aws.String(ami)}
	edit(data)
	if _, err := c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name), LaunchTemplateData: data}); err != nil {
		t.Fatal(err)
	}
	return name
}

func reservation(t *testing.T, c *ec2.Client, id string) types.CapacityReservation {
	t.Helper()
	out, err := c.DescribeCapacityReservations(ctx(t), &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: []string{id}})
	if err != nil || len(out.CapacityReservations) != 1 {
		t.Fatalf("describe %s: %v %v", id, out, err)
	}
	return out.CapacityReservations[0]
}

func TestCapacityReservationLaunchesUntilFull(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	id := s.EC2().AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: "us-west-2a", Count: 2,
		Tags: map[string]string{"team": "ml"}})
	s.EC2().AddCapacityReservation(ec2sim.Reservation{InstanceType: "c5.large", Zone: "us-west-2b", Count: 1, OwnerID: "222233334444"})
	lt := reservedTemplate(t, s, c, "reserved", id)

	byTag, err := c.DescribeCapacityReservations(ctx(t), &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{
		{Name: aws.String("tag:team"), Values: []string{"ml"}}, {Name: aws.String("state"), Values: []string{"active"}}}})
	if err != nil || len(byTag.CapacityReservations) != 1 || aws.ToString(byTag.CapacityReservations[0].CapacityReservationId) != id {
		t.Fatalf("by tag: %+v %v", byTag, err)
	}
	byOwner, err := c.DescribeCapacityReservations(ctx(t), &ec2.DescribeCapacityReservationsInput{Filters: []types.Filter{
		{Name: aws.String("owner-id"), Values: []string{"222233334444"}}}})
	if err != nil || len(byOwner.CapacityReservations) != 1 || aws.ToString(byOwner.CapacityReservations[0].InstanceType) != "c5.large" {
		t.Fatalf("by owner: %+v %v", byOwner, err)
	}

	var launched []string
	for i := range 3 {
		out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if len(out.Instances) != 1 {
				t.Fatalf("launch %d: %+v", i, out.Errors)
			}
			launched = append(launched, out.Instances[0].InstanceIds[0])
			continue
		}
		if len(out.Instances) != 0 || len(out.Errors) != 1 || aws.ToString(out.Errors[0].ErrorCode) != "ReservationCapacityExceeded" {
			t.Fatalf("third launch into a full reservation: instances %+v errors %+v", out.Instances, out.Errors)
		}
	}
	if got := aws.ToInt32(reservation(t, c, id).AvailableInstanceCount); got != 0 {
		t.Fatalf("available = %d, want 0", got)
	}
	inst, _, _ := s.EC2().Instance(launched[0])
	if aws.ToString(inst.CapacityReservationId) != id {
		t.Fatalf("instance reservation = %q, want %s", aws.ToString(inst.CapacityReservationId), id)
	}
	if _, err := c.TerminateInstances(ctx(t), &ec2.TerminateInstancesInput{InstanceIds: launched[:1]}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the terminated instance's slot comes back", func() bool { return aws.ToInt32(reservation(t, c, id).AvailableInstanceCount) == 1 })

	if err := s.EC2().EndCapacityReservation(id, types.CapacityReservationStateExpired); err != nil {
		t.Fatal(err)
	}
	r := reservation(t, c, id)
	if r.State != types.CapacityReservationStateExpired || aws.ToInt32(r.AvailableInstanceCount) != 0 {
		t.Fatalf("ended reservation: %s, %d available", r.State, aws.ToInt32(r.AvailableInstanceCount))
	}
	inst, _, _ = s.EC2().Instance(launched[1])
	if inst.CapacityReservationId != nil || inst.State.Name == types.InstanceStateNameShuttingDown {
		t.Fatalf("an ODCR's instance keeps running outside it: reservation %v, state %s", aws.ToString(inst.CapacityReservationId), inst.State.Name)
	}
}

func TestOpenCapacityReservationTakesMatchingLaunches(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	id := s.EC2().AddCapacityReservation(ec2sim.Reservation{InstanceType: "m5.large", Zone: "us-west-2a", Count: 1, Open: true})
	lt := launchTemplate(t, s, c, "nodes", "")
	out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
	if err != nil || len(out.Instances) != 1 {
		t.Fatalf("%+v %v", out, err)
	}
	inst, _, _ := s.EC2().Instance(out.Instances[0].InstanceIds[0])
	if aws.ToString(inst.CapacityReservationId) != id {
		t.Fatalf("an untargeted on-demand launch did not join the open reservation")
	}
}
