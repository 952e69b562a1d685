package awssim

import (
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// The rules of FIDELITY.md that CreateFleet's answers carry, one test a
// rule; each fails with its rule off (make sim-mutation).

// fleetErrorCodes launches one instance of lt and returns the instances
// launched and the codes of the fleet's errors.
func fleetErrorCodes(t *testing.T, c *ec2.Client, in *ec2.CreateFleetInput) (int, []string) {
	t.Helper()
	out, err := c.CreateFleet(ctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, e := range out.Errors {
		codes = append(codes, aws.ToString(e.ErrorCode))
	}
	n := 0
	for _, i := range out.Instances {
		n += len(i.InstanceIds)
	}
	return n, codes
}

func hasCode(codes []string, code string) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

func TestRuleIdempotentMismatch(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-token", "")
	in := fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))
	in.ClientToken = aws.String("claim-a-0")
	first, err := c.CreateFleet(ctx(t), in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateFleet(ctx(t), in)
	if err != nil || aws.ToString(again.FleetId) != aws.ToString(first.FleetId) {
		t.Errorf("same token, same request: %v, fleet %s want %s", err, aws.ToString(again.FleetId), aws.ToString(first.FleetId))
	}
	other := fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.xlarge", "us-west-2a"))
	other.ClientToken = in.ClientToken
	if _, err := c.CreateFleet(ctx(t), other); apiCode(err) != "IdempotentParameterMismatch" {
		t.Errorf("same token, other request: %v, want IdempotentParameterMismatch", err)
	}
}

func TestRuleInsufficientCapacity(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-ice", "")
	s.EC2().SetCapacity(ec2sim.Pool{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "on-demand"}, 0)
	n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
	if n != 0 || !hasCode(codes, "InsufficientInstanceCapacity") {
		t.Errorf("pool without capacity: %d launched, errors %v, want InsufficientInstanceCapacity", n, codes)
	}
}

func TestRuleSpotMaxPrice(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-maxprice", "")
	ov := override("m5.large", "us-west-2a")
	ov.MaxPrice = aws.String("0.0001")
	n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeSpot, ov))
	if n != 0 || !hasCode(codes, "SpotMaxPriceTooLow") {
		t.Errorf("max price under the spot price: %d launched, errors %v, want SpotMaxPriceTooLow", n, codes)
	}
}

// TestRuleUnfulfillableCapacity: a spot fleet no pool could serve also
// answers UnfulfillableCapacity for the whole request, with no override.
func TestRuleUnfulfillableCapacity(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-unfulfillable", "")
	s.EC2().SetCapacity(ec2sim.Pool{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}, 0)
	out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a")))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range out.Errors {
		if aws.ToString(e.ErrorCode) == "UnfulfillableCapacity" && e.LaunchTemplateAndOverrides == nil && e.Lifecycle == types.InstanceLifecycleSpot {
			found = true
		}
	}
	if len(out.Instances) != 0 || !found {
		t.Errorf("spot fleet with no pool left: %+v, want UnfulfillableCapacity with no override", out.Errors)
	}
}

func TestRuleSpotServiceLinkedRole(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-slr", "")
	s.SetServiceLinkedRole("AWSServiceRoleForEC2Spot", false)
	n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a")))
	if n != 0 || !hasCode(codes, "AuthFailure.ServiceLinkedRoleCreationNotPermitted") {
		t.Errorf("spot without the spot service-linked role: %d launched, errors %v", n, codes)
	}
	if n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))); n != 1 {
		t.Errorf("on-demand needs no spot role: %d launched, errors %v", n, codes)
	}
	s.SetServiceLinkedRole("AWSServiceRoleForEC2Spot", true)
	if n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a"))); n != 1 {
		t.Errorf("spot with the role: %d launched, errors %v", n, codes)
	}
}

// TestRuleVcpuLimit: m5.large has 2 vCPUs; a standard On-Demand quota of 3
// takes one, not two. Spot instances do not count against it.
func TestRuleVcpuLimit(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-vcpu", "")
	s.SetServiceQuota("ec2", "L-1216C47A", 3)
	if n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a"))); n != 1 {
		t.Fatalf("a spot instance: %d launched, errors %v", n, codes)
	}
	if n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))); n != 1 {
		t.Fatalf("first on-demand m5.large: %d launched, errors %v", n, codes)
	}
	n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2b")))
	if n != 0 || !hasCode(codes, "VcpuLimitExceeded") {
		t.Errorf("second on-demand m5.large past a 3-vCPU quota: %d launched, errors %v, want VcpuLimitExceeded", n, codes)
	}
	if n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("g4dn.xlarge", "us-west-2a"))); n != 1 {
		t.Errorf("another quota group: %d launched, errors %v", n, codes)
	}
}

func TestRuleMaxSpotInstanceCount(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	c := ec2.NewFromConfig(cfg)
	lt := launchTemplate(t, s, c, "lt-spotquota", "")
	s.SetServiceQuota("ec2", "L-34B43A08", 2)
	if n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a"))); n != 1 {
		t.Fatalf("first spot m5.large: %d launched, errors %v", n, codes)
	}
	n, codes := fleetErrorCodes(t, c, fleetInput(lt, types.DefaultTargetCapacityTypeSpot, override("m5.large", "us-west-2a")))
	if n != 0 || !hasCode(codes, "MaxSpotInstanceCountExceeded") || strings.Contains(strings.Join(codes, " "), "VcpuLimitExceeded") {
		t.Errorf("second spot m5.large past a 2-vCPU spot quota: %d launched, errors %v, want MaxSpotInstanceCountExceeded", n, codes)
	}
}
