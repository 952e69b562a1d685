package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/aws/userdata"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Well-known label keys the launch path reads from NodeClaim requirements.
const (
	labelZone         = "topology.kubernetes.io/zone"
	labelInstanceType = "node.kubernetes.io/instance-type"
	labelCapacityType = "karpenter.sh/capacity-type"
)

// maxLaunchAttempts bounds CreateFleet calls per Launch; each failed attempt
// removes at least one offering, so this only stops pathological loops.
const maxLaunchAttempts = 8

// iceSyncAge is how stale the local copy of the shared ICE set may be when a launch starts.
const iceSyncAge = 5 * time.Second

// LaunchRequest asks for one instance for a NodeClaim.
type LaunchRequest struct {
	NodeClaim *apis.NodeClaim
	NodeClass *apis.EC2NodeClass
	// InstanceTypes are the options the solver left for the claim, in any
	// order; Launch keeps the offerings the claim's requirements, the
	// EC2NodeClass's subnets and the ICE set allow, cheapest first.
	InstanceTypes []*catalog.InstanceType
}

// option is one instance type with the offerings a launch may use.
type option struct {
	it        *catalog.InstanceType
	offerings []catalog.Offering // of the chosen capacity type, cheapest first
	ami       AMI
}

// Launch creates the NodeClaim's instance with CreateFleet and returns it.
// Re-launching a claim whose instance already exists (a crash after
// CreateFleet) returns that instance. Capacity errors mark the offering
// unavailable in the ICE set and the launch goes on with what remains; when
// nothing remains the error wraps ErrInsufficientCapacity.
func (p *Provider) Launch(ctx context.Context, req LaunchRequest) (Instance, error) {
	claim, nc := req.NodeClaim, req.NodeClass
	if claim == nil || claim.Name == "" || nc == nil {
		return Instance{}, fmt.Errorf("launch: NodeClaim with a name and its EC2NodeClass are required")
	}
	name := claim.Name
	if err := p.ice.Sync(ctx, iceSyncAge); err != nil {
		p.log.WarnContext(ctx, "using local ICE set", "nodeclaim", name, "error", err)
	}
	if existing, err := p.findClaimInstance(ctx, name); err != nil {
		return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	} else if existing != nil {
		p.log.InfoContext(ctx, "nodeclaim already has an instance; adopting it", "nodeclaim", name, "instance", existing.ID)
		return *existing, nil
	}

	cluster, err := p.Cluster(ctx)
	if err != nil {
		return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	}
	groups, err := p.SecurityGroups(ctx, nc)
	if err != nil {
		return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	}
	amis, err := p.AMIs(ctx, nc)
	if err != nil {
		return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	}
	profile, err := p.instanceProfile(nc)
	if err != nil {
		return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
	}
	var lastErrs []string
	for attempt := range maxLaunchAttempts {
		// Re-read per attempt (cached): an exhausted subnet invalidates the cache.
		subnets, err := p.Subnets(ctx, nc)
		if err != nil {
			return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
		}
		zonal := ZonalSubnets(subnets)
		capacityType, opts := p.plan(claim, req.InstanceTypes, zonal, amis)
		if len(opts) == 0 {
			err := fmt.Errorf("%w: no available offering of %d instance types in zones %v", ErrInsufficientCapacity, len(req.InstanceTypes), zoneNames(zonal))
			return Instance{}, &LaunchError{NodeClaim: name, Errors: lastErrs, Err: err}
		}
		if err := checkMinValues(claim.Spec.Requirements, opts); err != nil {
			return Instance{}, &LaunchError{NodeClaim: name, Errors: lastErrs, Err: err}
		}
		in, images, err := p.fleetInput(ctx, claim, nc, cluster, groups, profile, zonal, capacityType, opts, attempt)
		if err != nil {
			return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
		}
		out, err := p.clients.EC2.CreateFleet(ctx, in)
		if err != nil {
			switch code := apiErrorCode(err); {
			case code == "IdempotentParameterMismatch":
				// An earlier run sent this token with other parameters (its
				// response was lost, then the ICE set or the options moved on):
				// a launch with this token happened. Taking the next token could
				// launch a second instance, so find the first one or give up.
				inst, err := p.awaitClaimInstance(ctx, name)
				if err != nil {
					return Instance{}, fmt.Errorf("launch nodeclaim %s: %w", name, err)
				}
				p.log.InfoContext(ctx, "earlier launch with the same client token found; adopting it", "nodeclaim", name, "instance", inst.ID)
				return inst, nil
			case strings.HasPrefix(code, "InvalidLaunchTemplate"):
				// A template was garbage-collected under us; forget cached names and retry.
				p.templates.invalidateAll()
				continue
			case code == "InvalidSubnetID.NotFound" || strings.HasPrefix(code, "InvalidGroup") || code == "InvalidAMIID.NotFound":
				p.InvalidateDiscovery()
			}
			return Instance{}, fmt.Errorf("launch nodeclaim %s: create fleet: %w", name, err)
		}
		inst, ok := p.launched(out, zonal, capacityType, images)
		if ok {
			// Pools the fleet tried before succeeding are short of capacity too;
			// record them so the next claim does not start there.
			_, _ = p.recordFleetErrors(ctx, name, out.Errors, zonal, capacityType)
			p.log.InfoContext(ctx, "launched instance", "nodeclaim", name, "instance", inst.ID, "instance-type", inst.Type,
				"zone", inst.Zone, "capacity-type", inst.CapacityType, "image", inst.ImageID, "launch-template", inst.LaunchTemplate)
			return inst, nil
		}
		if staleTemplate(out.Errors) {
			p.templates.invalidateAll()
			continue
		}
		if exhaustedSubnet(out.Errors) {
			// Free-address counts were stale; re-discover and let the zone's
			// next-best subnet (or another zone) take the launch.
			p.subnets.invalidateAll()
			if _, err := p.recordFleetErrors(ctx, name, capacityOnly(out.Errors), zonal, capacityType); err != nil {
				p.log.DebugContext(ctx, "no capacity errors beside the exhausted subnet", "nodeclaim", name)
			}
			lastErrs = fleetErrorStrings(out.Errors)
			continue
		}
		lastErrs, err = p.recordFleetErrors(ctx, name, out.Errors, zonal, capacityType)
		if err != nil {
			return Instance{}, &LaunchError{NodeClaim: name, Errors: lastErrs, Err: err}
		}
	}
	return Instance{}, &LaunchError{NodeClaim: name, Errors: lastErrs, Err: fmt.Errorf("%w: gave up after %d CreateFleet attempts", ErrInsufficientCapacity, maxLaunchAttempts)}
}

// awaitClaimInstance looks for the claim's instance with backoff for up to
// LaunchConfirmWait: EC2's reads are eventually consistent, so an instance
// launched moments ago may not be listed yet. It returns an error wrapping
// ErrLaunchInDoubt when none shows up.
func (p *Provider) awaitClaimInstance(ctx context.Context, name string) (Instance, error) {
	deadline := time.Now().Add(p.opts.LaunchConfirmWait)
	delay := 200 * time.Millisecond
	for {
		inst, err := p.findClaimInstance(ctx, name)
		if err != nil {
			return Instance{}, err
		}
		if inst != nil {
			return *inst, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			return Instance{}, fmt.Errorf("%w: no instance tagged for it after %s", ErrLaunchInDoubt, p.opts.LaunchConfirmWait)
		}
		t := time.NewTimer(min(delay, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return Instance{}, fmt.Errorf("%w: %w", ErrLaunchInDoubt, ctx.Err())
		case <-t.C:
		}
		delay = min(delay*2, 5*time.Second)
	}
}

// plan picks the capacity type (spot when the claim allows it and a spot
// offering is available, else on-demand, as Karpenter does) and the options
// for it, cheapest first, at most MaxInstanceTypes.
func (p *Provider) plan(claim *apis.NodeClaim, types []*catalog.InstanceType, zonal map[string]Subnet, amis []AMI) (string, []option) {
	reqs := claim.Spec.Requirements
	byCT := map[string][]option{}
	for _, it := range types {
		if it == nil || !allows(reqs, labelInstanceType, it.Name) {
			continue
		}
		ami, ok := pickAMI(amis, it)
		if !ok {
			continue
		}
		per := map[string][]catalog.Offering{}
		for _, o := range it.Offerings {
			if !o.Available || !allows(reqs, labelZone, o.Zone) || !allows(reqs, labelCapacityType, o.CapacityType) {
				continue
			}
			if _, ok := zonal[o.Zone]; !ok {
				continue
			}
			if p.ice.IsUnavailable(it.Name, o.Zone, o.CapacityType) {
				continue
			}
			per[o.CapacityType] = append(per[o.CapacityType], o)
		}
		for ct, offs := range per {
			sort.Slice(offs, func(i, j int) bool {
				if offs[i].Price != offs[j].Price {
					return offs[i].Price < offs[j].Price
				}
				return offs[i].Zone < offs[j].Zone
			})
			byCT[ct] = append(byCT[ct], option{it: it, offerings: offs, ami: ami})
		}
	}
	for _, o := range byCT {
		sortOptions(o)
	}
	ct := catalog.CapacityTypeOnDemand
	if len(byCT[catalog.CapacityTypeSpot]) > 0 {
		ct = catalog.CapacityTypeSpot
	}
	opts := byCT[ct]
	if od := byCT[catalog.CapacityTypeOnDemand]; ct == catalog.CapacityTypeSpot && len(od) > 0 {
		// As Karpenter does: when on-demand is allowed too, spot types dearer
		// than the cheapest on-demand option are not worth their interruptions.
		limit := od[0].offerings[0].Price
		cheaper := slices.DeleteFunc(slices.Clone(opts), func(o option) bool { return o.offerings[0].Price > limit })
		if len(cheaper) > 0 {
			opts = cheaper
		}
	}
	if len(opts) > p.opts.MaxInstanceTypes {
		opts = opts[:p.opts.MaxInstanceTypes]
	}
	return ct, opts
}

func sortOptions(opts []option) {
	sort.SliceStable(opts, func(i, j int) bool {
		a, b := opts[i].offerings[0].Price, opts[j].offerings[0].Price
		if a != b {
			return a < b
		}
		return opts[i].it.Name < opts[j].it.Name
	})
}

// checkMinValues verifies the options still offer at least minValues
// distinct values for every requirement that has one (after ICE filtering
// and truncation to MaxInstanceTypes), as Karpenter refuses such launches.
func checkMinValues(reqs []apis.NodeSelectorRequirementWithMinValues, opts []option) error {
	for _, r := range reqs {
		if r.MinValues == nil || *r.MinValues <= 0 {
			continue
		}
		distinct := map[string]bool{}
		for _, o := range opts {
			v, ok := o.it.Labels[r.Key]
			if r.Key == labelInstanceType {
				v, ok = o.it.Name, true
			}
			if ok {
				distinct[v] = true
			}
		}
		if len(distinct) < *r.MinValues {
			return fmt.Errorf("%w: requirement %s needs %d distinct values (minValues), the launchable options have %d",
				ErrInsufficientCapacity, r.Key, *r.MinValues, len(distinct))
		}
	}
	return nil
}

// allows evaluates the claim's requirements on key for value. Keys the
// requirements do not mention are allowed.
func allows(reqs []apis.NodeSelectorRequirementWithMinValues, key, value string) bool {
	for _, r := range reqs {
		if r.Key != key {
			continue
		}
		switch r.Operator {
		case corev1.NodeSelectorOpIn:
			if !slices.Contains(r.Values, value) {
				return false
			}
		case corev1.NodeSelectorOpNotIn:
			if slices.Contains(r.Values, value) {
				return false
			}
		case corev1.NodeSelectorOpDoesNotExist:
			return false
		}
	}
	return true
}

// NodeLabels are the labels the kubelet registers the node with: the
// claim's labels, its single-valued In requirements and the capacity type,
// minus labels the kubelet may not set on itself (it refuses to start with them).
func NodeLabels(claim *apis.NodeClaim, capacityType string) map[string]string {
	labels := map[string]string{}
	for k, v := range claim.Labels {
		labels[k] = v
	}
	for _, r := range claim.Spec.Requirements {
		if r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			labels[r.Key] = r.Values[0]
		}
	}
	labels[labelCapacityType] = capacityType
	for k, v := range labels {
		// The solver rejects invalid requirements; this keeps anything that
		// slipped through from reaching --node-labels, where a "," or "="
		// in a value would smuggle in labels of its own.
		if !kubeletMaySet(k) || len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			delete(labels, k)
		}
	}
	return labels
}

// kubeletMaySet mirrors the NodeRestriction rules for self-set labels.
func kubeletMaySet(key string) bool {
	domain, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	restricted := func(d string) bool {
		return d == "kubernetes.io" || strings.HasSuffix(d, ".kubernetes.io") || d == "k8s.io" || strings.HasSuffix(d, ".k8s.io")
	}
	if !restricted(domain) {
		return true
	}
	if domain == "kubelet.kubernetes.io" || domain == "node.kubernetes.io" ||
		strings.HasSuffix(domain, ".kubelet.kubernetes.io") || strings.HasSuffix(domain, ".node.kubernetes.io") {
		return true
	}
	switch key {
	case "kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os",
		"beta.kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/instance-type",
		"failure-domain.beta.kubernetes.io/region", "failure-domain.beta.kubernetes.io/zone",
		"topology.kubernetes.io/region", "topology.kubernetes.io/zone":
		return true
	}
	return false
}

// RegisterTaints are the taints a node registers with: the NodePool's taints,
// its startup taints, and karpenter.sh/unregistered:NoExecute (removed when
// the lifecycle function registers the node).
func RegisterTaints(claim *apis.NodeClaim) []corev1.Taint {
	out := make([]corev1.Taint, 0, len(claim.Spec.Taints)+len(claim.Spec.StartupTaints)+1)
	for _, t := range append(slices.Clone(claim.Spec.Taints), claim.Spec.StartupTaints...) {
		if !userdata.HasTaint(out, t) {
			out = append(out, t)
		}
	}
	unregistered := corev1.Taint{Key: apis.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute}
	if !userdata.HasTaint(out, unregistered) {
		out = append(out, unregistered)
	}
	return out
}

// Tags are the tags of the claim's instance, volumes and network interfaces.
func (p *Provider) Tags(claim *apis.NodeClaim, nc *apis.EC2NodeClass) map[string]string {
	tags := map[string]string{}
	for k, v := range nc.Spec.Tags {
		tags[k] = v
	}
	tags[ClusterTagKey(p.opts.ClusterName)] = "owned"
	tags[TagManagedBy] = ManagedBy
	tags[TagOwner] = p.opts.Owner
	tags[TagEKSClusterName] = p.opts.ClusterName
	tags[TagNodePool] = claim.NodePoolName()
	tags[TagNodeClaim] = claim.Name
	tags[TagInstanceNodeClass] = nc.Name
	if _, ok := nc.Spec.Tags[TagName]; !ok {
		tags[TagName] = claim.Name
	}
	return tags
}

// ClientToken is the CreateFleet idempotency token of a claim's attempt:
// the same claim and attempt always send the same token, so a retried call
// after a lost response returns the instance already launched. Launch moves
// to attempt n+1 only after attempt n's response showed no instance; see
// the package doc for the one-instance-per-claim rule.
func ClientToken(cluster, nodeClaim string, attempt int) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", cluster, nodeClaim, attempt))
	return "nw-" + hex.EncodeToString(sum[:16])
}

func (p *Provider) fleetInput(ctx context.Context, claim *apis.NodeClaim, nc *apis.EC2NodeClass, cluster ClusterInfo,
	sgs []SecurityGroup, profile string, zonal map[string]Subnet, capacityType string, opts []option, attempt int,
) (*ec2.CreateFleetInput, map[string]string, error) {
	udOpts, err := userDataOptions(nc, cluster, NodeLabels(claim, capacityType), RegisterTaints(claim))
	if err != nil {
		return nil, nil, err
	}
	bdm, err := blockDeviceRequests(nc)
	if err != nil {
		return nil, nil, err
	}
	allocOpts := catalog.OptionsForNodeClass(nc)
	// One launch template per (AMI, max pods): the kubelet's max pods must be
	// what the scheduler assumed for the type, and it differs between types
	// (ENI-limited density), as in Karpenter. Overrides keep the price rank
	// as priority across templates.
	type group struct {
		template  string
		overrides []ec2types.FleetLaunchTemplateOverridesRequest
	}
	groups := map[string]*group{}
	var order []string
	images := map[string]string{} // template name -> image id
	for rank, o := range opts {
		maxPods := int32(min(o.it.MaxPods(allocOpts), math.MaxInt32))
		key := fmt.Sprintf("%s/%d", o.ami.ID, maxPods)
		g, ok := groups[key]
		if !ok {
			ud := udOpts
			if ud.Family != userdata.Custom {
				ud.Kubelet.MaxPods = &maxPods
			}
			text, err := userdata.Generate(ud)
			if err != nil {
				return nil, nil, fmt.Errorf("EC2NodeClass %s: %w", nc.Name, err)
			}
			spec := templateSpec{
				Cluster: p.opts.ClusterName, Owner: p.opts.Owner, NodeClass: nc.Name, NodeClassHash: nc.Hash(),
				ImageID: o.ami.ID, UserData: base64UserData(text), SecurityGroupIDs: securityGroupIDs(sgs),
				InstanceProfile: profile, BlockDeviceMappings: bdm, MetadataOptions: metadataOptions(nc),
				DetailedMonitoring: sdkaws.ToBool(nc.Spec.DetailedMonitoring), AssociatePublicIP: nc.Spec.AssociatePublicIPAddress,
			}
			lt, err := p.ensureLaunchTemplate(ctx, spec)
			if err != nil {
				return nil, nil, err
			}
			g = &group{template: lt}
			groups[key] = g
			order = append(order, key)
			images[lt] = o.ami.ID
		}
		for _, off := range o.offerings {
			g.overrides = append(g.overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType:     ec2types.InstanceType(o.it.Name),
				SubnetId:         sdkaws.String(zonal[off.Zone].ID),
				AvailabilityZone: sdkaws.String(off.Zone),
				Priority:         sdkaws.Float64(float64(rank)),
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
	tags := ec2Tags(p.Tags(claim, nc))
	in := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		ClientToken:           sdkaws.String(ClientToken(p.opts.ClusterName, claim.Name, attempt)),
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       sdkaws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType),
		},
		// The fleet is tagged too: IAM policies scope CreateFleet by request tags
		// on every resource it creates (the CDK app's do).
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags},
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
			{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: tags},
		},
		Context: nc.Spec.Context,
	}
	if capacityType == catalog.CapacityTypeSpot {
		// A spot launch also creates a spot-instances-request, which IAM
		// authorizes CreateFleet against with its own request tags; untagged,
		// the stack's policy (like Karpenter's) denies every spot launch.
		in.TagSpecifications = append(in.TagSpecifications, ec2types.TagSpecification{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: tags})
		in.SpotOptions = &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized}
	} else {
		in.OnDemandOptions = &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice}
	}
	return in, images, nil
}

// launched extracts the instance of a successful fleet.
func (p *Provider) launched(out *ec2.CreateFleetOutput, zonal map[string]Subnet, capacityType string, images map[string]string) (Instance, bool) {
	for _, fi := range out.Instances {
		if len(fi.InstanceIds) == 0 {
			continue
		}
		inst := Instance{ID: fi.InstanceIds[0], Type: string(fi.InstanceType), CapacityType: capacityType, State: "pending"}
		if fi.Lifecycle != "" {
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
func (p *Provider) recordFleetErrors(ctx context.Context, claim string, errs []ec2types.CreateFleetError, zonal map[string]Subnet, capacityType string) ([]string, error) {
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
		if e.Lifecycle != "" {
			ct = lifecycleCapacityType(string(e.Lifecycle))
		}
		key := OfferingKey{InstanceType: string(lo.Overrides.InstanceType), Zone: zone, CapacityType: ct}
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
	out := make([]string, 0, len(zonal))
	for z := range zonal {
		out = append(out, z)
	}
	sort.Strings(out)
	return out
}
