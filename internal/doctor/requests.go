package doctor

import (
	"fmt"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// Request is one authorization a function's call needs, as IAM evaluates
// it: an action on one resource with the request context's condition keys
// (a call touching several resources is several Requests, one each, as
// the Service Authorization Reference's resource types for the action say).
type Request struct {
	Action   string
	Resource string
	// Context maps condition keys to their values (aws:TagKeys is a list).
	Context map[string][]string
	// Why names the call that makes it, for the report.
	Why string
}

// ARNs is where requests point: the account, its partition and region.
type ARNs struct{ Partition, Region, Account string }

func (a ARNs) ec2(resource string) string {
	return fmt.Sprintf("arn:%s:ec2:%s:%s:%s", a.Partition, a.Region, a.Account, resource)
}

// image ARNs carry no account.
func (a ARNs) image(id string) string {
	return fmt.Sprintf("arn:%s:ec2:%s::image/%s", a.Partition, a.Region, id)
}

func (a ARNs) request(action, resource, why string, ctx map[string][]string) Request {
	c := map[string][]string{"aws:RequestedRegion": {a.Region}}
	maps.Copy(c, ctx)
	return Request{Action: action, Resource: resource, Context: c, Why: why}
}

// requestTags are the aws:RequestTag/* keys and aws:TagKeys of tags a
// request puts on what it creates.
func requestTags(tags map[string]string) map[string][]string {
	if len(tags) == 0 {
		return map[string][]string{}
	}
	out := map[string][]string{"aws:TagKeys": slices.Sorted(maps.Keys(tags))}
	for k, v := range tags {
		out["aws:RequestTag/"+k] = []string{v}
	}
	return out
}

// resourceTags are the aws:ResourceTag/* keys of an existing resource.
func resourceTags(tags map[string]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range tags {
		out["aws:ResourceTag/"+k] = []string{v}
	}
	return out
}

func with(m map[string][]string, k string, v ...string) map[string][]string {
	out := maps.Clone(m)
	out[k] = v
	return out
}

// specTags are the tags of one resource type in tag specifications.
func specTags[S any](specs []S, typeOf func(S) string, tagsOf func(S) []ec2types.Tag, rt string) (map[string]string, bool) {
	var tags []ec2types.Tag
	found := false
	for _, s := range specs {
		if typeOf(s) == rt {
			tags, found = append(tags, tagsOf(s)...), true
		}
	}
	return tagMap(tags), found
}

func fleetSpecTags(specs []ec2types.TagSpecification, rt string) (map[string]string, bool) {
	return specTags(specs, func(s ec2types.TagSpecification) string { return string(s.ResourceType) },
		func(s ec2types.TagSpecification) []ec2types.Tag { return s.Tags }, rt)
}

func templateSpecTags(specs []ec2types.LaunchTemplateTagSpecificationRequest, rt string) (map[string]string, bool) {
	return specTags(specs, func(s ec2types.LaunchTemplateTagSpecificationRequest) string { return string(s.ResourceType) },
		func(s ec2types.LaunchTemplateTagSpecificationRequest) []ec2types.Tag { return s.Tags }, rt)
}

// LaunchRequests are the authorizations a probe's calls need from the
// controller role: creating its launch templates (tag on create
// included), its fleets (the fleet, instances and volumes tagged by the
// request; the network interfaces and spot requests its RunInstances
// makes, tagged by the template; the templates, images, subnets and
// security groups it uses; passing the node role), and terminating the
// instance and deleting the templates afterwards (by their tags).
func LaunchRequests(pr *Probe, a ARNs, nodeRole string) []Request {
	var out []Request
	for _, t := range pr.Templates {
		tags, _ := fleetSpecTags(t.TagSpecifications, "launch-template")
		why := "CreateLaunchTemplate " + str(t.LaunchTemplateName)
		rt := requestTags(tags)
		out = append(out, a.request("ec2:CreateLaunchTemplate", a.ec2("launch-template/*"), why, rt),
			a.request("ec2:CreateTags", a.ec2("launch-template/*"), why+" (tag on create)", with(rt, "ec2:CreateAction", "CreateLaunchTemplate")))
	}
	for i := range pr.Fleets {
		out = append(out, fleetRequests(pr, &pr.Fleets[i], a)...)
	}
	if nodeRole != "" && len(pr.Fleets) > 0 {
		out = append(out, a.request("iam:PassRole", nodeRole, "CreateFleet passes the node role (its instance profile's)",
			map[string][]string{"iam:PassedToService": {"ec2.amazonaws.com"}}))
	}
	if len(pr.Fleets) > 0 {
		tags, _ := fleetSpecTags(pr.Fleets[0].TagSpecifications, "instance")
		out = append(out, a.request("ec2:TerminateInstances", a.ec2("instance/"+fakeInstanceID), "TerminateInstances of the claim's instance", resourceTags(tags)))
	}
	for _, name := range slices.Sorted(maps.Keys(pr.TemplateIDs)) {
		out = append(out, a.request("ec2:DeleteLaunchTemplate", a.ec2("launch-template/"+pr.TemplateIDs[name]), "DeleteLaunchTemplate "+name+" (garbage collection)", resourceTags(pr.TemplateTags[name])))
	}
	return out
}

// launchActions: the instance launch inside an instant fleet is authorized
// as RunInstances too (denials of a CreateFleet name ec2:RunInstances;
// Karpenter's policy grants both); each request is made of both.
var launchActions = []string{"ec2:CreateFleet", "ec2:RunInstances"}

func fleetRequests(pr *Probe, f *ec2.CreateFleetInput, a ARNs) []Request {
	spot := f.TargetCapacitySpecification != nil && f.TargetCapacitySpecification.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeSpot
	why := fmt.Sprintf("CreateFleet (%s, NodePool %s)", pr.CapacityType, pr.NodePool)
	var out []Request
	both := func(resource, what string, ctx map[string][]string) {
		for _, act := range launchActions {
			out = append(out, a.request(act, resource, why+": "+what, ctx))
		}
	}
	for _, rt := range []string{"fleet", "instance", "volume"} {
		tags, tagged := fleetSpecTags(f.TagSpecifications, rt)
		ctx := requestTags(tags)
		if rt == "fleet" {
			out = append(out, a.request("ec2:CreateFleet", a.ec2("fleet/*"), why+": the fleet", ctx))
		} else {
			both(a.ec2(rt+"/*"), "the "+rt+" it creates", ctx)
		}
		if tagged {
			out = append(out, a.request("ec2:CreateTags", a.ec2(rt+"/*"), why+": tagging the "+rt+" on create", with(ctx, "ec2:CreateAction", "CreateFleet")))
		}
	}
	seen := map[string]bool{}
	for _, cfg := range f.LaunchTemplateConfigs {
		spec := cfg.LaunchTemplateSpecification
		if spec == nil {
			continue
		}
		name := str(spec.LaunchTemplateName)
		if id := str(spec.LaunchTemplateId); id != "" {
			for n, tid := range pr.TemplateIDs {
				if tid == id {
					name = n
				}
			}
		}
		if seen["lt:"+name] {
			continue
		}
		seen["lt:"+name] = true
		out = append(out, templateUseRequests(pr, name, spot, a, both)...)
		for _, ov := range cfg.Overrides {
			if s := str(ov.SubnetId); s != "" && !seen[s] {
				seen[s] = true
				both(a.ec2("subnet/"+s), "the subnet it launches into", nil)
			}
			if img := str(ov.ImageId); img != "" && !seen[img] {
				seen[img] = true
				both(a.image(img), "the image it boots", nil)
			}
		}
	}
	return out
}

// templateUseRequests: the launch template itself (by its tags), what the
// template creates with the tags it gives (network interface, spot
// request) and what it references (image, security groups).
func templateUseRequests(pr *Probe, name string, spot bool, a ARNs, both func(string, string, map[string][]string)) []Request {
	var out []Request
	id := pr.TemplateIDs[name]
	if id == "" {
		id = "*" // a template the probe never saw: any of them
	}
	both(a.ec2("launch-template/"+id), "its launch template "+name, resourceTags(pr.TemplateTags[name]))
	data, made := pr.TemplateData[name]
	created := []string{"network-interface"}
	if spot {
		created = append(created, "spot-instances-request")
	}
	for _, rt := range created {
		tags := pr.PoolTags
		if made {
			tags, _ = templateSpecTags(data.TagSpecifications, rt)
		}
		ctx := requestTags(tags)
		both(a.ec2(rt+"/*"), "the "+rt+" its RunInstances creates (tagged by the template)", ctx)
		out = append(out, a.request("ec2:CreateTags", a.ec2(rt+"/*"), "CreateFleet: tagging the "+rt+" on create", with(ctx, "ec2:CreateAction", "CreateFleet")))
	}
	if !made {
		return out
	}
	if img := str(data.ImageId); img != "" {
		both(a.image(img), "the image its template boots", nil)
	}
	groups := slices.Clone(data.SecurityGroupIds)
	for _, ni := range data.NetworkInterfaces {
		groups = append(groups, ni.Groups...)
	}
	slices.Sort(groups)
	for _, g := range slices.Compact(groups) {
		both(a.ec2("security-group/"+g), "a security group of its template", nil)
	}
	return out
}
