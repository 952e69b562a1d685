package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/catalog"
)

// Instance is an EC2 instance launched for (or found belonging to) this cluster.
type Instance struct {
	ID       string
	Type     string
	Zone     string
	ZoneID   string
	SubnetID string
	// SecurityGroupIDs are the instance's groups, sorted (DescribeInstances only).
	SecurityGroupIDs []string
	CapacityType     string // spot | on-demand
	ImageID          string
	State            string // pending, running, shutting-down, terminated, stopping, stopped
	// StateReason is why EC2 last changed its state ("Client.InvalidKMSKey.InvalidState: ..."),
	// "" when it gives none.
	StateReason string
	PrivateIP   string
	LaunchTime  time.Time
	NodeClaim   string // karpenter.sh/nodeclaim tag
	NodePool    string // karpenter.sh/nodepool tag
	Owner       string // TagOwner: the stack that launched it ("" before owner tags existed)
	// LaunchTemplate is the template name the instance was launched from
	// (set by Launch; GC of templates keeps the ones live claims name).
	LaunchTemplate string
	Tags           map[string]string
	// Reservation is the reserved offering (capacity reservation) the
	// instance runs in; nil when it runs in none (CapacityType is then
	// spot or on-demand). DescribeInstances knows only the id and whether
	// it is a capacity block.
	Reservation *catalog.Offering
	// PlacementGroupID and PlacementPartition are the instance's placement
	// group and partition ("" and 0 for none).
	PlacementGroupID   string
	PlacementPartition int32
}

// ProviderID is the Kubernetes node providerID of the instance: aws:///<zone>/<id>.
func (i Instance) ProviderID() string { return "aws:///" + i.Zone + "/" + i.ID }

// ParseProviderID returns the instance id of an aws:///<zone>/<id> provider ID.
func ParseProviderID(providerID string) (zone, id string, err error) {
	rest, ok := strings.CutPrefix(providerID, "aws:///")
	if !ok {
		return "", "", fmt.Errorf("provider ID %q: want aws:///<zone>/<instance-id>", providerID)
	}
	zone, id, ok = strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(id, "i-") {
		return "", "", fmt.Errorf("provider ID %q: want aws:///<zone>/<instance-id>", providerID)
	}
	return zone, id, nil
}

// ErrInstanceNotFound is returned for an instance id EC2 does not know (or has forgotten).
var ErrInstanceNotFound = errors.New("instance not found")

func instanceFromEC2(in ec2types.Instance) Instance {
	tags := tagMap(in.Tags)
	out := Instance{
		ID:           sdkaws.ToString(in.InstanceId),
		Type:         string(in.InstanceType),
		SubnetID:     sdkaws.ToString(in.SubnetId),
		ImageID:      sdkaws.ToString(in.ImageId),
		PrivateIP:    sdkaws.ToString(in.PrivateIpAddress),
		LaunchTime:   sdkaws.ToTime(in.LaunchTime),
		CapacityType: "on-demand",
		NodeClaim:    tags[TagNodeClaim],
		NodePool:     tags[TagNodePool],
		Owner:        tags[TagOwner],
		Tags:         tags,
	}
	switch {
	case in.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot:
		out.CapacityType = "spot"
	case sdkaws.ToString(in.CapacityReservationId) != "" && targetedReservation(in):
		// As Karpenter (instance.capacityTypeFromInstance): an instance
		// launched into its reservation is reserved capacity; one that EC2
		// put into an open reservation stays on-demand, or its class's
		// reservation selectors would call it drifted.
		out.CapacityType = catalog.CapacityTypeReserved
		out.Reservation = &catalog.Offering{CapacityType: catalog.CapacityTypeReserved, ReservationID: *in.CapacityReservationId,
			ReservationType: catalog.ReservationTypeDefault}
		if in.InstanceLifecycle == ec2types.InstanceLifecycleTypeCapacityBlock {
			out.Reservation.ReservationType = catalog.ReservationTypeCapacityBlock
		}
	}
	if in.Placement != nil {
		out.Zone = sdkaws.ToString(in.Placement.AvailabilityZone)
		out.ZoneID = sdkaws.ToString(in.Placement.AvailabilityZoneId)
		out.PlacementGroupID = sdkaws.ToString(in.Placement.GroupId)
		out.PlacementPartition = sdkaws.ToInt32(in.Placement.PartitionNumber)
	}
	if in.State != nil {
		out.State = string(in.State.Name)
	}
	if in.StateReason != nil {
		out.StateReason = sdkaws.ToString(in.StateReason.Message)
	}
	for _, g := range in.SecurityGroups {
		out.SecurityGroupIDs = append(out.SecurityGroupIDs, sdkaws.ToString(g.GroupId))
	}
	sort.Strings(out.SecurityGroupIDs)
	return out
}

func (p *Provider) describeInstances(ctx context.Context, in *ec2.DescribeInstancesInput) ([]Instance, error) {
	pager := ec2.NewDescribeInstancesPaginator(p.clients.EC2, in)
	return allPages(ctx, pager.HasMorePages, pager.NextPage, func(page *ec2.DescribeInstancesOutput) []Instance {
		var out []Instance
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				out = append(out, instanceFromEC2(i))
			}
		}
		return out
	})
}

// GetInstance describes one instance (ErrInstanceNotFound when EC2 does not know it).
func (p *Provider) GetInstance(ctx context.Context, id string) (Instance, error) {
	got, err := p.describeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		if isNotFound(err) {
			return Instance{}, fmt.Errorf("describe instance %s: %w", id, ErrInstanceNotFound)
		}
		return Instance{}, fmt.Errorf("describe instance %s: %w", id, err)
	}
	for _, i := range got {
		if i.ID == id {
			return i, nil
		}
	}
	return Instance{}, fmt.Errorf("describe instance %s: %w", id, ErrInstanceNotFound)
}

// describeMany describes ids in one call; when EC2 rejects the batch because
// an id is unknown, it falls back to one call per id so the known ones are
// still found. Unknown ids are absent from the result.
func (p *Provider) describeMany(ctx context.Context, ids []string) (map[string]Instance, error) {
	out := map[string]Instance{}
	got, err := p.describeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	if err == nil {
		for _, i := range got {
			out[i.ID] = i
		}
		return out, nil
	}
	if !isNotFound(err) {
		return nil, fmt.Errorf("describe instances %v: %w", ids, err)
	}
	for _, id := range ids {
		inst, err := p.GetInstance(ctx, id)
		if errors.Is(err, ErrInstanceNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = inst
	}
	return out, nil
}

// liveStates are the states of an instance that still exists or may come back.
var liveStates = []string{"pending", "running", "stopping", "stopped", "shutting-down"}

// ListClusterInstances returns every non-terminated instance this stack
// launched for this cluster (its ownership tag, TagManagedBy and this
// stack's TagOwner), oldest first (the lifecycle's garbage collector
// compares them with the NodeClaim records). Karpenter's instances, with the
// same cluster tags, and another nodewright stack's are not listed.
func (p *Provider) ListClusterInstances(ctx context.Context) ([]Instance, error) {
	got, err := p.describeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: sdkaws.String("tag-key"), Values: []string{ClusterTagKey(p.opts.ClusterName)}},
		{Name: sdkaws.String("tag:" + TagManagedBy), Values: []string{ManagedBy}},
		{Name: sdkaws.String("tag:" + TagOwner), Values: []string{p.opts.Owner}},
		{Name: sdkaws.String("instance-state-name"), Values: liveStates},
	}})
	if err != nil {
		return nil, fmt.Errorf("list instances of cluster %s: %w", p.opts.ClusterName, err)
	}
	out := got[:0]
	for _, i := range got {
		if p.Owns(i) && i.State != "terminated" {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].LaunchTime.Equal(out[b].LaunchTime) {
			return out[a].LaunchTime.Before(out[b].LaunchTime)
		}
		return out[a].ID < out[b].ID
	})
	return out, nil
}

// findClaimInstance returns a live instance already launched for nodeClaim,
// so a re-launch after a crash adopts it instead of launching a second one.
func (p *Provider) findClaimInstance(ctx context.Context, nodeClaim string) (*Instance, error) {
	got, err := p.describeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: sdkaws.String("tag:" + TagNodeClaim), Values: []string{nodeClaim}},
		{Name: sdkaws.String("tag-key"), Values: []string{ClusterTagKey(p.opts.ClusterName)}},
		{Name: sdkaws.String("tag:" + TagManagedBy), Values: []string{ManagedBy}},
		{Name: sdkaws.String("tag:" + TagOwner), Values: []string{p.opts.Owner}},
		{Name: sdkaws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	if err != nil {
		return nil, fmt.Errorf("find instance of nodeclaim %s: %w", nodeClaim, err)
	}
	for _, i := range got {
		if p.Owns(i) && i.NodeClaim == nodeClaim && (i.State == "pending" || i.State == "running") {
			return &i, nil
		}
	}
	return nil, nil
}

// Owns reports whether this stack launched i for this cluster: the cluster's
// ownership tag alone would also match Karpenter's instances, and
// TagManagedBy alone another nodewright stack's.
func (p *Provider) Owns(i Instance) bool {
	return p.nodewrightOf(i) && i.Owner == p.opts.Owner
}

// nodewrightOf reports whether some nodewright stack launched i for this cluster.
func (p *Provider) nodewrightOf(i Instance) bool {
	v, ok := i.Tags[ClusterTagKey(p.opts.ClusterName)]
	return ok && (v == "owned" || v == "shared") && i.Tags[TagManagedBy] == ManagedBy
}

// mayTerminate reports whether Terminate may act on i: this stack's, or
// nodewright's from before owner tags existed (Terminate is only ever asked
// for an instance a claim in this stack's table names; garbage collection
// never lists an untagged one). Another stack's never.
func (p *Provider) mayTerminate(i Instance) bool {
	return p.nodewrightOf(i) && (i.Owner == p.opts.Owner || i.Owner == "")
}

// Terminate terminates instances this stack launched for this cluster (its
// ownership tag, TagManagedBy and TagOwner; see mayTerminate). It describes
// them first: already terminated ones count as done; any other instance
// (another cluster's or stack's, Karpenter's, a person's) is never touched
// and makes Terminate return an error wrapping ErrNotOwned (the owned ones
// in the same call are still terminated).
//
// An id EC2 does not know is either long gone (EC2 forgets terminated
// instances after about an hour) or launched so recently that EC2's
// eventually consistent reads do not show it yet (EC2 API reference,
// "Eventual consistency"; TerminateInstances then answers
// InvalidInstanceID.NotFound too). Only the caller knows the instance's
// age, so Terminate returns an error wrapping ErrInstanceNotVisible for
// such ids and the caller decides (InvisibleLongEnough): an instance
// launched within the consistency window is not done, or it would run on
// with no claim until the garbage collector finds it.
func (p *Provider) Terminate(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	found, err := p.describeMany(ctx, ids)
	if err != nil {
		return fmt.Errorf("terminate: %w", err)
	}
	var owned, refused, unknown []string
	for _, id := range ids {
		inst, ok := found[id]
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		if inst.State == "terminated" {
			continue
		}
		if !p.mayTerminate(inst) {
			refused = append(refused, id)
			continue
		}
		owned = append(owned, id)
	}
	if len(owned) > 0 {
		_, err := p.clients.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: owned})
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("terminate instances %v: %w", owned, err)
		}
		p.log.InfoContext(ctx, "terminated instances", "instances", owned)
	}
	var errs []error
	if len(refused) > 0 {
		errs = append(errs, fmt.Errorf("terminate %v: %w %s (want tags %s=owned, %s=%s and %s=%s)", refused, ErrNotOwned, p.opts.ClusterName,
			ClusterTagKey(p.opts.ClusterName), TagManagedBy, ManagedBy, TagOwner, p.opts.Owner))
	}
	if len(unknown) > 0 {
		errs = append(errs, fmt.Errorf("terminate %v: %w", unknown, ErrInstanceNotVisible))
	}
	return errors.Join(errs...)
}

// InvisibleLongEnough reports whether an instance Terminate did not find
// (ErrInstanceNotVisible), launched at launchedAt, can count as gone: it
// was launched longer ago than the consistency window, which is
// Options.LaunchConfirmWait, the bound this package already gives EC2's
// reads to catch up with a launch. A zero launchedAt (never launched, or
// unknown) counts as long ago.
func (p *Provider) InvisibleLongEnough(launchedAt, now time.Time) bool {
	return launchedAt.IsZero() || now.Sub(launchedAt) > p.opts.LaunchConfirmWait
}

// targetedReservation tells whether in was launched to run only in a
// capacity reservation (preference capacity-reservations-only), as every
// reserved launch of nodewright and Karpenter is.
func targetedReservation(in ec2types.Instance) bool {
	spec := in.CapacityReservationSpecification
	return spec != nil && spec.CapacityReservationPreference == ec2types.CapacityReservationPreferenceCapacityReservationsOnly
}
