package ec2sim

import (
	"context"
	"fmt"
	"regexp"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

type launchTemplate struct {
	seq  int // creation order, for stable listing
	meta types.LaunchTemplate
	data types.RequestLaunchTemplateData
}

var ltName = regexp.MustCompile(`^[a-zA-Z0-9().\-/_]{3,128}$`)

// CreateLaunchTemplate stores version 1 of a launch template.
func (c *Cloud) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput) (*ec2.CreateLaunchTemplateOutput, error) {
	name := aws.ToString(in.LaunchTemplateName)
	if !ltName.MatchString(name) {
		return nil, protocol.Errorf("InvalidLaunchTemplateName.MalformedException", "Launch template name %q is malformed", name)
	}
	if in.LaunchTemplateData == nil {
		return nil, protocol.Errorf("MissingParameter", "The request must contain the parameter LaunchTemplateData")
	}
	if err := c.checkTemplateTagTypes(in.LaunchTemplateData); err != nil {
		return nil, err
	}
	if err := c.checkTemplateLimits(in); err != nil {
		return nil, err
	}
	for _, s := range in.TagSpecifications {
		// CreateLaunchTemplate API reference, TagSpecifications: "To tag the
		// launch template, the resource type must be launch-template."
		if s.ResourceType != types.ResourceTypeLaunchTemplate {
			return nil, notTaggable(s.ResourceType)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.templateByName(name) != nil {
		return nil, protocol.Errorf("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	if id := aws.ToString(in.LaunchTemplateData.ImageId); id != "" && c.imageByID(id) == nil {
		return nil, protocol.Errorf("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	}
	id := c.newID("lt")
	c.ltSeq++
	lt := &launchTemplate{seq: c.ltSeq, data: *in.LaunchTemplateData, meta: types.LaunchTemplate{
		LaunchTemplateId: aws.String(id), LaunchTemplateName: aws.String(name),
		CreateTime: aws.Time(c.cfg.Now().UTC()), CreatedBy: aws.String(fmt.Sprintf("arn:aws:iam::%s:root", c.cfg.Account)),
		DefaultVersionNumber: aws.Int64(1), LatestVersionNumber: aws.Int64(1),
		Tags: tagsFor(in.TagSpecifications, types.ResourceTypeLaunchTemplate),
	}}
	c.templates[id] = lt
	meta := lt.meta
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &meta}, nil
}

// DescribeLaunchTemplates lists launch templates by id, name and filters.
func (c *Cloud) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput) (*ec2.DescribeLaunchTemplatesOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var sel []*launchTemplate
	switch {
	case len(in.LaunchTemplateIds) > 0:
		for _, id := range in.LaunchTemplateIds {
			lt := c.templates[id]
			if lt == nil {
				return nil, protocol.Errorf("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", id)
			}
			sel = append(sel, lt)
		}
	case len(in.LaunchTemplateNames) > 0:
		for _, n := range in.LaunchTemplateNames {
			lt := c.templateByName(n)
			if lt == nil {
				return nil, protocol.Errorf("InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
			}
			sel = append(sel, lt)
		}
	default:
		for _, lt := range c.templates {
			sel = append(sel, lt)
		}
		sort.Slice(sel, func(i, j int) bool { return sel[i].seq < sel[j].seq })
	}
	return describe(in.Filters, paging{in.MaxResults, in.NextToken, 1, 200}, func(yield func(types.LaunchTemplate, attrs) bool) {
		for _, lt := range sel {
			meta := lt.meta
			meta.Tags = cloneTags(lt.meta.Tags)
			if !yield(meta, taggedValuesOf(lt.meta.Tags, map[string][]string{
				"launch-template-name": one(lt.meta.LaunchTemplateName), "launch-template-id": one(lt.meta.LaunchTemplateId),
			})) {
				return
			}
		}
	}, func(items []types.LaunchTemplate, next *string) *ec2.DescribeLaunchTemplatesOutput {
		return &ec2.DescribeLaunchTemplatesOutput{LaunchTemplates: items, NextToken: next}
	})
}

// DeleteLaunchTemplate removes a launch template by id or name.
func (c *Cloud) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput) (*ec2.DeleteLaunchTemplateOutput, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lt, err := c.resolveTemplate(in.LaunchTemplateId, in.LaunchTemplateName)
	if err != nil {
		return nil, err
	}
	delete(c.templates, *lt.meta.LaunchTemplateId)
	meta := lt.meta
	return &ec2.DeleteLaunchTemplateOutput{LaunchTemplate: &meta}, nil
}

func (c *Cloud) resolveTemplate(id, name *string) (*launchTemplate, error) {
	switch {
	case aws.ToString(id) != "":
		if lt := c.templates[*id]; lt != nil {
			return lt, nil
		}
		return nil, protocol.Errorf("InvalidLaunchTemplateId.NotFound", "The specified launch template, with template ID %s, does not exist.", *id)
	case aws.ToString(name) != "":
		if lt := c.templateByName(*name); lt != nil {
			return lt, nil
		}
		return nil, protocol.Errorf("InvalidLaunchTemplateName.NotFoundException", "The specified launch template, with template name %s, does not exist.", *name)
	}
	return nil, protocol.Errorf("MissingParameter", "The request must contain the parameter LaunchTemplateId or LaunchTemplateName")
}

func (c *Cloud) templateByName(name string) *launchTemplate {
	for _, lt := range c.templates {
		if *lt.meta.LaunchTemplateName == name {
			return lt
		}
	}
	return nil
}
