package aws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/aws/userdata"
	"github.com/nodewright/nodewright/internal/catalog"
)

// fleetTemplates is what an attempt's launch templates hold that its
// answer is read with: each template's image and, for a reserved launch,
// the reservation each template targets.
type fleetTemplates struct {
	images   map[string]string           // template name -> image id
	reserved map[string]catalog.Offering // template name -> its reserved offering
	// placement is the placement group and partition every template names.
	placement placement
}

// fleetInput is the CreateFleet request of one attempt: a launch template
// config per (AMI, max pods, reservation) with the options' offerings as
// overrides, tagged, with the capacity type's allocation strategy. A
// reserved launch names only reservations of one kind, each through a
// template that targets it, and falls back nowhere: the next attempt (or
// claim) does, as in Karpenter.
func (p *Provider) fleetInput(ctx context.Context, l *launch, zonal map[string]Subnet, capacityType string, opts []option, attempt int,
) (*ec2.CreateFleetInput, *fleetTemplates, error) {
	launchTags := p.Tags(l.claim, l.nc)
	if err := checkTags(l.nc.Name, "each instance and volume", launchTags); err != nil {
		return nil, nil, err
	}
	opts = oneReservationPartition(capacityType, opts)
	configs, fts, err := p.templateConfigs(ctx, l, zonal, capacityType, opts)
	if err != nil {
		return nil, nil, err
	}
	tags := ec2Tags(launchTags)
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           sdkaws.String(ClientToken(p.opts.ClusterName, l.claim.Name, attempt)),
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       sdkaws.Int32(1),
			DefaultTargetCapacityType: targetCapacityType(capacityType, opts),
		},
		// The resource types an instant fleet can tag (the CreateFleet API
		// reference: fleet and instance; the EC2 user guide's "Tag an EC2
		// Fleet": volume too). IAM scopes CreateFleet by request tags on each.
		// The network interfaces and spot requests a launch also creates take
		// their tags from the launch template (PoolTags): putting them here is
		// rejected as "not a valid taggable resource type for this operation".
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags},
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
		},
		Context: l.nc.Spec.Context,
	}
	switch in.TargetCapacitySpecification.DefaultTargetCapacityType {
	case ec2types.DefaultTargetCapacityTypeSpot:
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	case ec2types.DefaultTargetCapacityTypeReservedCapacity:
		// Interruptible reservations are reserved capacity of their own
		// kind; on-demand options would not apply to them.
		in.ReservedCapacityOptions = &ec2types.ReservedCapacityOptionsRequest{
			ReservationTypes: []ec2types.FleetReservationType{ec2types.FleetReservationTypeInterruptibleCapacityReservation},
		}
	case ec2types.DefaultTargetCapacityTypeCapacityBlock:
		// A capacity block has no allocation to choose: one block, one type.
	default:
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in, fts, nil
}

// targetCapacityType is the fleet's target capacity type: reserved
// capacity launches as on-demand into its reservations, as capacity-block
// into a capacity block, or as reserved-capacity into interruptible
// reservations (Karpenter's shapes, pkg/providers/instance/types.go).
func targetCapacityType(capacityType string, opts []option) ec2types.DefaultTargetCapacityType {
	if capacityType != catalog.CapacityTypeReserved {
		return ec2types.DefaultTargetCapacityType(capacityType)
	}
	if len(opts) > 0 {
		switch o := opts[0].offerings[0]; {
		case reservationKind(o) == catalog.ReservationTypeCapacityBlock:
			return ec2types.DefaultTargetCapacityTypeCapacityBlock
		case o.Interruptible:
			return ec2types.DefaultTargetCapacityTypeReservedCapacity
		}
	}
	return ec2types.DefaultTargetCapacityTypeOnDemand
}

// oneReservationPartition keeps, of a reserved launch's options, the
// reservations of the cheapest option's kind: a fleet launches into
// default reservations, into interruptible ones or into capacity blocks,
// never a mix. Of capacity blocks it keeps the cheapest alone, since
// CreateFleet takes one capacity block per request (EC2 user guide,
// "Launch instances into Capacity Blocks using EC2 Fleet"; Karpenter's
// CapacityBlockFilter).
func oneReservationPartition(capacityType string, opts []option) []option {
	if capacityType != catalog.CapacityTypeReserved || len(opts) == 0 {
		return opts
	}
	first := opts[0].offerings[0]
	if reservationKind(first) == catalog.ReservationTypeCapacityBlock {
		o := opts[0]
		o.offerings = o.offerings[:1]
		return []option{o}
	}
	var out []option
	for _, o := range opts {
		o.offerings = slices.DeleteFunc(slices.Clone(o.offerings), func(off catalog.Offering) bool {
			return reservationKind(off) != reservationKind(first) || off.Interruptible != first.Interruptible
		})
		if len(o.offerings) > 0 {
			out = append(out, o)
		}
	}
	return out
}

// templateConfigs ensures one launch template per (AMI, max pods,
// reservation) and returns the fleet's launch template configs, in the
// order the options first need them, and what each template holds. The kubelet's max pods
// must be what the scheduler assumed for the type, and it differs between
// types (ENI-limited density), as in Karpenter.
func (p *Provider) templateConfigs(ctx context.Context, l *launch, zonal map[string]Subnet, capacityType string, opts []option,
) ([]ec2types.FleetLaunchTemplateConfigRequest, *fleetTemplates, error) {
	labels := userDataLabels(l.claim, l.nc.AMIFamily(), capacityType, l.pl.labels())
	udOpts, err := userDataOptions(l.nc, l.cluster, labels, RegisterTaints(l.claim))
	if err != nil {
		return nil, nil, err
	}
	bdm, err := blockDeviceRequests(l.nc)
	if err != nil {
		return nil, nil, err
	}
	allocOpts := l.allocatable()
	type group struct {
		template  string
		overrides []ec2types.FleetLaunchTemplateOverridesRequest
	}
	groups := map[string]*group{}
	var order []string
	fts := &fleetTemplates{images: map[string]string{}, reserved: map[string]catalog.Offering{}, placement: l.pl}
	for _, o := range opts {
		maxPods := int32(min(o.it.MaxPods(allocOpts), math.MaxInt32))
		for _, off := range o.offerings {
			key := fmt.Sprintf("%s/%d/%s", o.ami.ID, maxPods, off.ReservationID)
			g, ok := groups[key]
			if !ok {
				lt, err := p.groupTemplate(ctx, l, udOpts, bdm, templateGroup{image: o.ami.ID, maxPods: maxPods, reserved: off, capacityType: capacityType})
				if err != nil {
					return nil, nil, err
				}
				g = &group{template: lt}
				groups[key] = g
				order = append(order, key)
				fts.images[lt] = o.ami.ID
				if off.ReservationID != "" {
					fts.reserved[lt] = off
				}
			}
			g.overrides = append(g.overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType:     ec2types.InstanceType(o.it.Name),
				SubnetId:         sdkaws.String(zonal[off.Zone].ID),
				AvailabilityZone: sdkaws.String(off.Zone),
				// The image again, as Karpenter names it: the fleet's answer
				// then says which image each instance runs.
				ImageId: sdkaws.String(o.ami.ID),
				// The offering's price, as Karpenter's: EC2 reads priorities
				// only under the prioritized strategies, which neither uses.
				Priority: sdkaws.Float64(off.Price),
			})
		}
	}
	configs := make([]ec2types.FleetLaunchTemplateConfigRequest, 0, len(order))
	for _, key := range order {
		g := groups[key]
		configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
			LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{
				LaunchTemplateName: sdkaws.String(g.template), Version: sdkaws.String("$Latest"),
			},
			Overrides: g.overrides,
		})
	}
	return configs, fts, nil
}

// templateGroup is what distinguishes the templates of one launch: the
// image, the kubelet's max pods and the reservation (zero for none), and
// whether the launch is spot (only a spot template tags spot requests).
type templateGroup struct {
	image        string
	maxPods      int32
	reserved     catalog.Offering
	capacityType string
}

// groupTemplate ensures the launch template of one (AMI, max pods) group
// and returns its name.
func (p *Provider) groupTemplate(ctx context.Context, l *launch, ud userdata.Options, bdm []ec2types.LaunchTemplateBlockDeviceMappingRequest,
	tg templateGroup) (string, error) {
	maxPods := tg.maxPods
	if ud.Family != userdata.Custom {
		ud.Kubelet.MaxPods = &maxPods
	}
	text, err := p.userData.generate(ud)
	if err != nil {
		return "", fmt.Errorf("EC2NodeClass %s: %w", l.nc.Name, err)
	}
	nc := l.nc
	spec := templateSpec{
		Shape:   templateShape,
		Cluster: p.opts.ClusterName, Owner: p.opts.Owner, NodeClass: nc.Name, NodeClassHash: nc.Hash(),
		ImageID: tg.image, UserData: base64UserData(text), SecurityGroupIDs: securityGroupIDs(l.groups),
		InstanceProfile: l.profile, BlockDeviceMappings: bdm, MetadataOptions: metadataOptions(nc),
		DetailedMonitoring: sdkaws.ToBool(nc.Spec.DetailedMonitoring), AssociatePublicIP: nc.Spec.AssociatePublicIPAddress,
		IPPrefixCount: nc.Spec.IPPrefixCount, NetworkInterfaces: nc.Spec.NetworkInterfaces, ConnectionTracking: nc.Spec.ConnectionTracking,
		IPv6:         l.cluster.IPFamily == "ipv6",
		ResourceTags: p.PoolTags(l.claim.NodePoolName(), nc), ClassTags: nc.Spec.Tags, NodePool: l.claim.NodePoolName(),
		// EC2 fails an on-demand launch from a template that tags spot
		// requests ("You cannot specify tags for Spot instances requests if
		// there are no Spot instances requests being created by the
		// request": aws/karpenter-provider-aws #5850), so spot and other
		// launches have templates of their own.
		SpotRequestTags: tg.capacityType == catalog.CapacityTypeSpot,
	}
	if c := nc.Spec.CPUOptions; c != nil {
		spec.NestedVirtualization = sdkaws.ToString(c.NestedVirtualization)
	}
	if g := l.pl.group; g != nil {
		spec.PlacementGroupID, spec.PlacementPartition = g.ID, l.pl.partition
	}
	// A reserved launch goes into its reservation or fails (never into
	// on-demand capacity it did not plan); every other launch stays out of
	// open reservations EC2 would otherwise fill (others' capacity, and a
	// node that would not be what was planned). Karpenter's shape since
	// its ReservedCapacity feature (on by default).
	spec.CapacityReservationPreference = string(ec2types.CapacityReservationPreferenceNone)
	if id := tg.reserved.ReservationID; id != "" {
		spec.CapacityReservation = id
		spec.CapacityReservationPreference = string(ec2types.CapacityReservationPreferenceCapacityReservationsOnly)
		switch {
		case reservationKind(tg.reserved) == catalog.ReservationTypeCapacityBlock:
			spec.MarketType = string(ec2types.MarketTypeCapacityBlock)
		case tg.reserved.Interruptible:
			spec.MarketType = string(ec2types.MarketTypeInterruptibleCapacityReservation)
		}
	}
	return p.ensureLaunchTemplate(ctx, spec)
}

// LabelDoNotSyncTaints on a Node says its kubelet registered the claim's
// taints itself, so registration leaves the taints alone: a startup taint
// an agent has already removed must not come back (Karpenter's label,
// kubernetes-sigs/karpenter #1772). Every family but Custom, whose user
// data is the user's own, registers them.
const LabelDoNotSyncTaints = "karpenter.sh/do-not-sync-taints"

// userDataLabels are the labels the kubelet registers the node with, as
// Karpenter's: the claim's labels (with the single-valued requirements
// NodeLabels adds) and its capacity type, but not the labels the launched
// instance decides (type, zone, reservation, ...), which the kubelet,
// the cloud controller and registration (from the claim's record) set.
// Keeping those out lets every claim of a pool share its templates.
func userDataLabels(claim *apis.NodeClaim, family, capacityType string, placement map[string]string) map[string]string {
	labels := NodeLabels(claim, capacityType)
	for k := range labels {
		if _, own := claim.Labels[k]; !own && k != labelCapacityType && launchDecided(k) {
			delete(labels, k)
		}
	}
	maps.Copy(labels, placement)
	if family != apis.AMIFamilyCustom {
		labels[LabelDoNotSyncTaints] = "true"
	}
	return labels
}

// launchDecided reports labels whose value comes with the launched
// instance rather than with the claim.
func launchDecided(key string) bool {
	switch key {
	case LabelZoneID, catalog.LabelCapacityReservationID, catalog.LabelCapacityReservationType, catalog.LabelCapacityReservationInterruptible:
		return true
	}
	return catalog.WellKnownLabels[key]
}

// launched extracts the instance of a successful fleet.
func (p *Provider) launched(out *ec2.CreateFleetOutput, zonal map[string]Subnet, capacityType string, fts *fleetTemplates) (Instance, bool) {
	images := fts.images
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 {
			continue
		}
		inst := Instance{ID: fi.InstanceIds[0], Type: string(fi.InstanceType), CapacityType: capacityType, State: "pending"}
		if fi.Lifecycle != "" && capacityType != catalog.CapacityTypeReserved {
			inst.CapacityType = lifecycleCapacityType(string(fi.Lifecycle))
		}
		if lo := fi.LaunchTemplateAndOverrides; lo != nil {
			if ov := lo.Overrides; ov != nil {
				inst.Zone = sdkaws.ToString(ov.AvailabilityZone)
				inst.SubnetID = sdkaws.ToString(ov.SubnetId)
				inst.ImageID = sdkaws.ToString(ov.ImageId)
				if inst.Type == "" {
					inst.Type = string(ov.InstanceType)
				}
			}
			if spec := lo.LaunchTemplateSpecification; spec != nil {
				inst.LaunchTemplate = sdkaws.ToString(spec.LaunchTemplateName)
			}
		}
		if inst.Zone == "" {
			inst.Zone = zoneOfSubnet(zonal, inst.SubnetID)
		}
		inst.ZoneID = zonal[inst.Zone].ZoneID
		if r, ok := fts.reserved[inst.LaunchTemplate]; ok {
			inst.Reservation = &r
		}
		if g := fts.placement.group; g != nil {
			inst.PlacementGroupID, inst.PlacementPartition = g.ID, fts.placement.partition
		}
		if inst.ImageID == "" {
			inst.ImageID = images[inst.LaunchTemplate]
		}
		if inst.ImageID == "" && len(images) == 1 {
			for lt, img := range images {
				inst.LaunchTemplate, inst.ImageID = lt, img
			}
		}
		return inst, true
	}
	return Instance{}, false
}

// staleTemplate reports fleet errors saying a launch template is gone
// (deleted by garbage collection after we cached its name).
func staleTemplate(errs []ec2types.CreateFleetError) bool {
	for _, e := range errs {
		if strings.HasPrefix(sdkaws.ToString(e.ErrorCode), "InvalidLaunchTemplate") {
			return true
		}
	}
	return false
}

func exhaustedSubnet(errs []ec2types.CreateFleetError) bool {
	for _, e := range errs {
		if sdkaws.ToString(e.ErrorCode) == "InsufficientFreeAddressesInSubnet" {
			return true
		}
	}
	return false
}

func capacityOnly(errs []ec2types.CreateFleetError) []ec2types.CreateFleetError {
	var out []ec2types.CreateFleetError
	for _, e := range errs {
		if IsCapacityError(sdkaws.ToString(e.ErrorCode)) {
			out = append(out, e)
		}
	}
	return out
}

func fleetErrorStrings(errs []ec2types.CreateFleetError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		out = append(out, sdkaws.ToString(e.ErrorCode)+": "+sdkaws.ToString(e.ErrorMessage))
	}
	return out
}

func lifecycleCapacityType(l string) string {
	if l == "spot" {
		return catalog.CapacityTypeSpot
	}
	return catalog.CapacityTypeOnDemand
}

func zoneOfSubnet(zonal map[string]Subnet, id string) string {
	for z, s := range zonal {
		if s.ID == id {
			return z
		}
	}
	return ""
}

// recordFleetErrors marks the offerings of capacity errors unavailable. It
// returns an error when any fleet error is not about capacity (retrying the
// same request cannot help), or when no offering could be identified.
func (p *Provider) recordFleetErrors(ctx context.Context, claim string, errs []ec2types.CreateFleetError, zonal map[string]Subnet,
	capacityType string, fts *fleetTemplates) ([]string, error) {
	var msgs []string
	marked := 0
	var fatal error
	for _, e := range errs {
		code := sdkaws.ToString(e.ErrorCode)
		msgs = append(msgs, code+": "+sdkaws.ToString(e.ErrorMessage))
		if !IsCapacityError(code) {
			if fatal == nil {
				fatal = fmt.Errorf("create fleet: %s: %s", code, sdkaws.ToString(e.ErrorMessage))
			}
			continue
		}
		lo := e.LaunchTemplateAndOverrides
		if lo == nil || lo.Overrides == nil || lo.Overrides.InstanceType == "" {
			continue
		}
		zone := sdkaws.ToString(lo.Overrides.AvailabilityZone)
		if zone == "" {
			zone = zoneOfSubnet(zonal, sdkaws.ToString(lo.Overrides.SubnetId))
		}
		ct := capacityType
		if e.Lifecycle != "" && ct != catalog.CapacityTypeReserved {
			ct = lifecycleCapacityType(string(e.Lifecycle))
		}
		key := OfferingKey{InstanceType: string(lo.Overrides.InstanceType), Zone: zone, CapacityType: ct}
		if ct == catalog.CapacityTypeReserved && fts != nil && lo.LaunchTemplateSpecification != nil {
			// Each reservation has its own template: mark that one only.
			key.ReservationID = fts.reserved[sdkaws.ToString(lo.LaunchTemplateSpecification.LaunchTemplateName)].ReservationID
		}
		if err := p.ice.MarkUnavailable(ctx, key, code); err != nil {
			p.log.WarnContext(ctx, "ICE entry not shared", "nodeclaim", claim, "offering", key.String(), "error", err)
		}
		p.log.InfoContext(ctx, "offering unavailable", "nodeclaim", claim, "offering", key.String(), "code", code)
		marked++
	}
	if fatal != nil && marked == 0 {
		return msgs, fatal
	}
	if marked == 0 {
		return msgs, errors.New("create fleet returned neither an instance nor an attributable error")
	}
	return msgs, nil
}

func zoneNames(zonal map[string]Subnet) []string {
	return slices.Sorted(maps.Keys(zonal))
}
