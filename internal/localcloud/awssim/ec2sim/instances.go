package ec2sim

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

type instance struct {
	types.Instance
	capacityType string
	userData     string
	reservation  string
	// hidden counts the DescribeInstances calls that still miss this
	// instance (EC2's eventual consistency after a launch).
	hidden int
	// unseen: launched less than ConsistencyDelay ago (rule
	// launch-consistency), so DescribeInstances and TerminateInstances do
	// not know it yet.
	unseen bool
	// volumeKeys are the customer managed KMS keys its encrypted volumes
	// name (rule kms-grant).
	volumeKeys []string
	// instanceImpaired and systemImpaired are when its instance or system
	// status check started failing (zero: passing), as a test set them
	// (FailStatusCheck); DescribeInstanceStatus reports them.
	instanceImpaired, systemImpaired time.Time
}

var stateCodes = map[types.InstanceStateName]int32{
	types.InstanceStateNamePending: 0, types.InstanceStateNameRunning: 16, types.InstanceStateNameShuttingDown: 32,
	types.InstanceStateNameTerminated: 48, types.InstanceStateNameStopping: 64, types.InstanceStateNameStopped: 80,
}

func state(n types.InstanceStateName) *types.InstanceState {
	return &types.InstanceState{Name: n, Code: aws.Int32(stateCodes[n])}
}

// setState moves an instance to a new state and returns the transition for
// observers. Caller holds mu and calls notify after unlocking.
func (c *Cloud) setState(in *instance, to types.InstanceStateName, reason string) Transition {
	from := in.State.Name
	in.State = state(to)
	if reason != "" {
		// EC2's state reason codes come first in the message:
		// "Client.UserInitiatedShutdown: User initiated shutdown".
		code, _, _ := strings.Cut(reason, ": ")
		in.StateReason = &types.StateReason{Code: aws.String(code), Message: aws.String(reason)}
		in.StateTransitionReason = aws.String(fmt.Sprintf("%s (%s)", reason, c.cfg.Now().UTC().Format("2006-01-02 15:04:05 MST")))
	}
	if to == types.InstanceStateNameTerminated {
		if s := c.subnetByID(aws.ToString(in.SubnetId)); s != nil {
			s.releaseIP(aws.ToString(in.PrivateIpAddress))
		}
		c.leaveReservation(in)
	}
	return Transition{Instance: in.snapshot(), From: from, To: to, CapacityType: in.capacityType, UserData: in.userData}
}

func (c *Cloud) notify(ts ...Transition) {
	c.mu.Lock()
	obs := append([]func(Transition){}, c.observers...)
	c.mu.Unlock()
	for _, t := range ts {
		for _, o := range obs {
			o(t)
		}
	}
}

// schedule moves id from -> to after d unless something else moved it first.
func (c *Cloud) schedule(id string, d time.Duration, from, to types.InstanceStateName, reason string) {
	c.cfg.After(d, func() {
		c.mu.Lock()
		in := c.instances[id]
		if in == nil || in.State.Name != from {
			c.mu.Unlock()
			return
		}
		t := c.setState(in, to, reason)
		next := to == types.InstanceStateNameShuttingDown
		c.mu.Unlock()
		c.notify(t)
		if next {
			c.schedule(id, c.cfg.ShuttingDownDelay, types.InstanceStateNameShuttingDown, types.InstanceStateNameTerminated, "")
		}
	})
}

// Instances returns a copy of every instance, in launch order.
func (c *Cloud) Instances() []types.Instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]types.Instance, 0, len(c.order))
	for _, id := range c.order {
		out = append(out, c.instances[id].snapshot())
	}
	return out
}

// Instance returns one instance and its capacity type ("spot" or "on-demand").
func (c *Cloud) Instance(id string) (types.Instance, string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	in := c.instances[id]
	if in == nil {
		return types.Instance{}, "", false
	}
	return in.snapshot(), in.capacityType, true
}

// snapshot copies what CreateTags changes in place, so callers can read
// the result after the lock is released. Caller holds mu.
func (in *instance) snapshot() types.Instance {
	cp := in.Instance
	cp.Tags = append([]types.Tag(nil), in.Tags...)
	return cp
}

// Terminate is a cloud-initiated termination (e.g. spot reclaim): the
// instance goes to shutting-down now and terminated after ShuttingDownDelay.
func (c *Cloud) Terminate(id, reason string) error {
	c.mu.Lock()
	in := c.instances[id]
	if in == nil {
		c.mu.Unlock()
		return fmt.Errorf("terminate %s: no such instance", id)
	}
	if in.State.Name == types.InstanceStateNameShuttingDown || in.State.Name == types.InstanceStateNameTerminated {
		c.mu.Unlock()
		return nil
	}
	t := c.setState(in, types.InstanceStateNameShuttingDown, reason)
	c.mu.Unlock()
	c.notify(t)
	c.schedule(id, c.cfg.ShuttingDownDelay, types.InstanceStateNameShuttingDown, types.InstanceStateNameTerminated, reason)
	return nil
}

// TerminateInstances is the API call.
func (c *Cloud) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput) (*ec2.TerminateInstancesOutput, error) {
	if len(in.InstanceIds) == 0 {
		return nil, protocol.Errorf("MissingParameter", "The request must contain the parameter InstanceId")
	}
	c.mu.Lock()
	if err := c.checkInstanceIDs(in.InstanceIds); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if err := c.throttleResources(terminateResource, len(in.InstanceIds)); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	out := &ec2.TerminateInstancesOutput{}
	var ts []Transition
	var started []string
	for _, id := range in.InstanceIds {
		inst := c.instances[id]
		prev := inst.State
		if prev.Name == types.InstanceStateNamePending || prev.Name == types.InstanceStateNameRunning ||
			prev.Name == types.InstanceStateNameStopped || prev.Name == types.InstanceStateNameStopping {
			ts = append(ts, c.setState(inst, types.InstanceStateNameShuttingDown, "Client.UserInitiatedShutdown: User initiated shutdown"))
			started = append(started, id)
		}
		out.TerminatingInstances = append(out.TerminatingInstances, types.InstanceStateChange{InstanceId: aws.String(id), PreviousState: prev, CurrentState: inst.State})
	}
	c.mu.Unlock()
	c.notify(ts...)
	for _, id := range started {
		c.schedule(id, c.cfg.ShuttingDownDelay, types.InstanceStateNameShuttingDown, types.InstanceStateNameTerminated, "")
	}
	return out, nil
}

func (c *Cloud) checkInstanceIDs(ids []string) error {
	for _, id := range ids {
		if !strings.HasPrefix(id, "i-") {
			return protocol.Errorf("InvalidInstanceID.Malformed", "Invalid id: \"%s\"", id)
		}
		if in := c.instances[id]; in == nil || in.unseen {
			return protocol.Errorf("InvalidInstanceID.NotFound", "The instance ID '%s' does not exist", id)
		}
	}
	return nil
}

// HideNewInstances makes every instance launched from now on invisible to
// its first n DescribeInstances calls, as EC2's eventually consistent reads
// can be right after a launch (0 turns it off for later launches).
func (c *Cloud) HideNewInstances(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hideNew = n
}

// DescribeInstances lists instances by id and filters, paginated.
func (c *Cloud) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput) (*ec2.DescribeInstancesOutput, error) {
	if len(in.InstanceIds) > 0 && in.MaxResults != nil {
		return nil, protocol.Errorf("InvalidParameterCombination", "The parameter instancesSet cannot be used with the parameter maxResults")
	}
	c.mu.Lock()
	// Deferred calls run last first: the lock is released before the
	// instances of an ended capacity block are terminated.
	defer c.terminateAll(c.expireReservations())
	defer c.mu.Unlock()
	ids := c.order
	if len(in.InstanceIds) > 0 {
		if err := c.checkInstanceIDs(in.InstanceIds); err != nil {
			return nil, err
		}
		ids = in.InstanceIds
	}
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 5, 1000}, func(yield func(*instance, attrs) bool) {
		for _, id := range ids {
			inst := c.instances[id]
			if inst.unseen {
				continue
			}
			if inst.hidden > 0 {
				inst.hidden--
				continue
			}
			if !yield(inst, inst.attrs) {
				return
			}
		}
	}, func(items []*instance, next *string) *ec2.DescribeInstancesOutput {
		out := &ec2.DescribeInstancesOutput{NextToken: next, Reservations: []types.Reservation{}}
		for _, inst := range items {
			out.Reservations = append(out.Reservations, types.Reservation{
				ReservationId: aws.String(inst.reservation), OwnerId: aws.String(c.cfg.Account),
				Instances: []types.Instance{inst.snapshot()},
			})
		}
		return out
	})
}

// attrs answers the filters on an instance; it reads the instance when a
// filter asks, so a describe sees its state at that moment.
func (in *instance) attrs(name string) ([]string, bool) {
	// Tag filters first, without building the attribute maps (no attribute
	// name starts with "tag"): a DescribeInstances by a claim's tag weighs
	// every instance, thousands in a scale test.
	if v, ok := tagAttrs(in.Tags, name); ok {
		return v, true
	}
	if v, ok := placementAttrs(in.Placement)[name]; ok {
		return v, true
	}
	return taggedValuesOf(in.Tags, map[string][]string{
		"instance-id": one(in.InstanceId), "instance-state-name": {string(in.State.Name)},
		"instance-state-code": {fmt.Sprint(aws.ToInt32(in.State.Code))}, "instance-type": {string(in.InstanceType)},
		"availability-zone": one(in.Placement.AvailabilityZone), "subnet-id": one(in.SubnetId), "vpc-id": one(in.VpcId),
		"image-id": one(in.ImageId), "private-dns-name": one(in.PrivateDnsName), "private-ip-address": one(in.PrivateIpAddress),
		"instance-lifecycle": {string(in.InstanceLifecycle)}, "architecture": {string(in.Architecture)},
	})(name)
}

// CreateTags adds or overwrites tags on instances, volumes, network
// interfaces, launch templates, images, subnets and security groups.
func (c *Cloud) CreateTags(_ context.Context, in *ec2.CreateTagsInput) (*ec2.CreateTagsOutput, error) {
	if len(in.Resources) == 0 || len(in.Tags) == 0 {
		return nil, protocol.Errorf("MissingParameter", "The request must contain the parameters ResourceId and Tag")
	}
	if err := c.checkTags(in.Tags); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var targets []*[]types.Tag
	for _, id := range in.Resources {
		p := c.tagsOf(id)
		if p == nil {
			code := "InvalidID"
			if strings.HasPrefix(id, "i-") {
				code = "InvalidInstanceID.NotFound"
			}
			return nil, protocol.Errorf(code, "The ID '%s' does not exist", id)
		}
		targets = append(targets, p)
	}
	if err := c.checkTagTotals(targets, in.Tags); err != nil {
		return nil, err
	}
	for _, p := range targets {
		*p = mergeTags(*p, in.Tags)
	}
	return &ec2.CreateTagsOutput{}, nil
}

func (c *Cloud) tagsOf(id string) *[]types.Tag {
	if in := c.instances[id]; in != nil {
		return &in.Tags
	}
	if lt := c.templates[id]; lt != nil {
		return &lt.meta.Tags
	}
	if img := c.imageByID(id); img != nil {
		return &img.Tags
	}
	if s := c.subnetByID(id); s != nil {
		return &s.Tags
	}
	for _, g := range c.groups {
		if *g.GroupId == id {
			return &g.Tags
		}
	}
	if p, ok := c.resourceTags[id]; ok {
		return p
	}
	return nil
}

// ResourceTags returns the tags of a volume or network interface created with an instance.
func (c *Cloud) ResourceTags(id string) []types.Tag {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.resourceTags[id]; p != nil {
		return append([]types.Tag(nil), (*p)...)
	}
	return nil
}

// UserData returns the base64 user data an instance was launched with.
func (c *Cloud) UserData(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if in := c.instances[id]; in != nil {
		return in.userData
	}
	return ""
}
