package ec2sim

import (
	"fmt"
	"maps"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim/wire"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// Authorizations lists what IAM authorizes an EC2 request against: one
// iam.Target per resource the call names or creates, with its resource
// tags and the tags the request puts on it, plus the implicit
// ec2:CreateTags of tag-on-create and the iam:PassRole of a launch with an
// instance profile. The caller keeps the targets whose resource type the
// action's row in the Service Authorization Reference lists (iam.Actions).
func (c *Cloud) Authorizations(action string, form url.Values) ([]iam.Target, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch action {
	case "CreateFleet":
		return targetsOf(form, c.fleetTargets)
	case "CreateLaunchTemplate":
		return targetsOf(form, c.createTemplateTargets)
	case "DeleteLaunchTemplate":
		return targetsOf(form, c.deleteTemplateTargets)
	case "TerminateInstances":
		return targetsOf(form, c.terminateTargets)
	case "CreateTags":
		return targetsOf(form, c.tagTargets)
	}
	// Describe* support no resource-level permissions: Resource "*".
	return []iam.Target{{Action: "ec2:" + action, Type: "", ARN: "*"}}, nil
}

// targetsOf decodes an action's request and lists its targets.
func targetsOf[I any](form url.Values, targets func(*I) []iam.Target) ([]iam.Target, error) {
	in := new(I)
	if err := wire.Decode(form, in); err != nil {
		return nil, err
	}
	return targets(in), nil
}

func (c *Cloud) deleteTemplateTargets(in *ec2.DeleteLaunchTemplateInput) []iam.Target {
	lt, err := c.resolveTemplate(in.LaunchTemplateId, in.LaunchTemplateName)
	if err != nil {
		return nil // the call fails on its own; nothing to authorize
	}
	return []iam.Target{c.existing("ec2:DeleteLaunchTemplate", "launch-template", *lt.meta.LaunchTemplateId)}
}

func (c *Cloud) terminateTargets(in *ec2.TerminateInstancesInput) []iam.Target {
	var out []iam.Target
	for _, id := range in.InstanceIds {
		out = append(out, c.existing("ec2:TerminateInstances", "instance", id))
	}
	return out
}

func (c *Cloud) tagTargets(in *ec2.CreateTagsInput) []iam.Target {
	var out []iam.Target
	for _, id := range in.Resources {
		t := c.existing("ec2:CreateTags", typeOfID(id), id)
		t.RequestTags = tagMap(in.Tags)
		out = append(out, t)
	}
	return out
}

// fleetTargets: the fleet, instances and volumes it creates, each with the
// request's tags of that type; per launch template config, the network
// interface and (spot) spot-instances-request its launches create, with
// the request tags the template gives them (an instant fleet cannot tag
// them itself: checkFleetTagTypes); the launch templates, images, subnets
// and security groups it uses; ec2:CreateTags for every created type
// tagged; and iam:PassRole for the templates' instance profiles.
func (c *Cloud) fleetTargets(in *ec2.CreateFleetInput) []iam.Target {
	const action = "ec2:CreateFleet"
	var out []iam.Target
	for _, rt := range []types.ResourceType{types.ResourceTypeFleet, types.ResourceTypeInstance, types.ResourceTypeVolume} {
		out = append(out, c.creating(action, "CreateFleet", string(rt), in.TagSpecifications)...)
	}
	launchCreates := []types.ResourceType{types.ResourceTypeNetworkInterface}
	if isSpotFleet(in) {
		launchCreates = append(launchCreates, types.ResourceTypeSpotInstancesRequest)
	}
	for _, cfg := range in.LaunchTemplateConfigs {
		spec := cfg.LaunchTemplateSpecification
		if spec == nil {
			continue
		}
		lt, err := c.resolveTemplate(spec.LaunchTemplateId, spec.LaunchTemplateName)
		if err != nil {
			continue // the fleet reports the error for this config
		}
		// AWS authorizes the launch's network interface and spot request
		// with the tags the template gives them (rule template-request-tags);
		// with the rule off, with the fleet's own (which cannot name them).
		requestTags := templateTagSpecs(lt.data)
		if !c.cfg.Rules.On(fidelity.TemplateRequestTags) {
			requestTags = in.TagSpecifications
		}
		for _, rt := range launchCreates {
			out = append(out, c.creating(action, "CreateFleet", string(rt), requestTags)...)
		}
		out = append(out, c.existing(action, "launch-template", *lt.meta.LaunchTemplateId))
		out = append(out, c.templateUses(action, lt.data)...)
		for _, ov := range cfg.Overrides {
			if id := aws.ToString(ov.SubnetId); id != "" {
				out = append(out, c.existing(action, "subnet", id))
			}
			if id := aws.ToString(ov.ImageId); id != "" {
				out = append(out, c.existing(action, "image", id))
			}
		}
	}
	// The instance launch inside the fleet is authorized as RunInstances
	// against what it creates and uses (the reference: CreateFleet's own
	// rows lack the network interface, security groups and spot request;
	// real CreateFleet denials name ec2:RunInstances). Each target is
	// offered to both actions; each keeps the types its row lists.
	for _, t := range out {
		if t.Action == action {
			rt := t
			rt.Action = "ec2:RunInstances"
			out = append(out, rt)
		}
	}
	return dedupe(out)
}

// templateUses lists what a launch from template data references.
func (c *Cloud) templateUses(action string, d types.RequestLaunchTemplateData) []iam.Target {
	var out []iam.Target
	if id := aws.ToString(d.ImageId); id != "" {
		out = append(out, c.existing(action, "image", id))
	}
	groups := append([]string(nil), d.SecurityGroupIds...)
	for _, ni := range d.NetworkInterfaces {
		groups = append(groups, ni.Groups...)
		if id := aws.ToString(ni.SubnetId); id != "" {
			out = append(out, c.existing(action, "subnet", id))
		}
	}
	for _, g := range groups {
		out = append(out, c.existing(action, "security-group", g))
	}
	if k := aws.ToString(d.KeyName); k != "" {
		out = append(out, iam.Target{Action: action, Type: "key-pair", ARN: c.arn("key-pair", k)})
	}
	if cr := d.CapacityReservationSpecification; cr != nil && cr.CapacityReservationTarget != nil {
		if id := aws.ToString(cr.CapacityReservationTarget.CapacityReservationId); id != "" {
			out = append(out, c.existing(action, "capacity-reservation", id))
		}
	}
	if pg, _, _ := c.templatePlacementGroup(&d); pg != nil {
		// Placement group ARNs carry the group's name, not its id.
		out = append(out, iam.Target{Action: action, Type: "placement-group", ARN: c.arn("placement-group", aws.ToString(pg.GroupName)), Tags: tagMap(pg.Tags)})
	}
	if p := d.IamInstanceProfile; p != nil {
		profile := aws.ToString(p.Arn)
		if profile == "" {
			profile = fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", c.cfg.Account, aws.ToString(p.Name))
		}
		// The caller maps the profile to its role (the simulator has no IAM
		// of its own) and authorizes iam:PassRole on it.
		out = append(out, iam.Target{Action: "iam:PassRole", Type: "instance-profile", ARN: profile,
			Keys: iam.Context{"iam:passedtoservice": {"ec2.amazonaws.com"}}})
	}
	return out
}

func (c *Cloud) createTemplateTargets(in *ec2.CreateLaunchTemplateInput) []iam.Target {
	out := c.creating("ec2:CreateLaunchTemplate", "CreateLaunchTemplate", string(types.ResourceTypeLaunchTemplate), in.TagSpecifications)
	if in.LaunchTemplateData != nil {
		for _, t := range c.templateUses("ec2:CreateLaunchTemplate", *in.LaunchTemplateData) {
			if t.Action != "iam:PassRole" { // passing the role is checked at launch
				out = append(out, t)
			}
		}
	}
	return dedupe(out)
}

// creating returns the target of a resource a call creates, with the
// request tags given for its type, and, when the request tags it, the
// ec2:CreateTags that tag-on-create also needs (with ec2:CreateAction).
func (c *Cloud) creating(action, createAction, resourceType string, specs []types.TagSpecification) []iam.Target {
	arn := c.arn(resourceType, "*")
	var tags []types.Tag
	tagged := false
	for _, s := range specs {
		if string(s.ResourceType) == resourceType {
			tags, tagged = mergeTags(tags, s.Tags), true
		}
	}
	t := iam.Target{Action: action, Type: resourceType, ARN: arn, Creating: true}
	if tagged {
		t.RequestTags = tagMap(tags)
	}
	out := []iam.Target{t}
	if tagged {
		ct := t
		ct.Action = "ec2:CreateTags"
		ct.Keys = iam.Context{"ec2:createaction": {createAction}}
		out = append(out, ct)
	}
	return out
}

// existing is the target of a resource that exists, with its tags; an
// unknown ID still gets its ARN (the call itself then fails as EC2 would).
func (c *Cloud) existing(action, resourceType, id string) iam.Target {
	t := iam.Target{Action: action, Type: resourceType, ARN: c.arn(resourceType, id), Tags: map[string]string{}}
	if p := c.tagsOf(id); p != nil {
		t.Tags = tagMap(*p)
	}
	return t
}

// arn formats an EC2 ARN; images and snapshots carry no account.
func (c *Cloud) arn(resourceType, id string) string {
	account := c.cfg.Account
	if resourceType == "image" || resourceType == "snapshot" {
		account = ""
	}
	return fmt.Sprintf("arn:aws:ec2:%s:%s:%s/%s", c.cfg.Region, account, resourceType, id)
}

// typeOfID maps an EC2 resource ID to its IAM resource type.
func typeOfID(id string) string {
	prefix, _, _ := strings.Cut(id, "-")
	switch prefix {
	case "i":
		return "instance"
	case "lt":
		return "launch-template"
	case "vol":
		return "volume"
	case "eni":
		return "network-interface"
	case "ami":
		return "image"
	case "subnet":
		return "subnet"
	case "sg":
		return "security-group"
	case "sir":
		return "spot-instances-request"
	case "fleet":
		return "fleet"
	}
	return prefix
}

// tagMap is a tag list as IAM's condition keys see it (a repeated key
// keeps its last value).
func tagMap(tags []types.Tag) map[string]string {
	return maps.Collect(func(yield func(string, string) bool) {
		for _, t := range tags {
			if !yield(aws.ToString(t.Key), aws.ToString(t.Value)) {
				return
			}
		}
	})
}

// dedupe keeps one of each target; targets created with different request
// tags (the interfaces of two launch templates) are each kept.
func dedupe(ts []iam.Target) []iam.Target {
	seen := map[string]bool{}
	var out []iam.Target
	for _, t := range ts {
		k := t.Action + " " + t.ARN + " " + fmt.Sprint(t.RequestTags)
		if !seen[k] {
			seen[k] = true
			out = append(out, t)
		}
	}
	return out
}
