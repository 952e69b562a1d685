package ec2sim

import (
	"net/http"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim/wire"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// DryRun answers an authorized request that has DryRun set: the error the
// call would fail with, else DryRunOperation, with nothing created,
// changed or terminated. EC2 API reference, every mutating action's DryRun
// parameter: "Checks whether you have the required permissions for the
// operation, without actually making the request, and provides an error
// response. If you have the required permissions, the error response is
// DryRunOperation. Otherwise, it is UnauthorizedOperation." (the caller
// has checked the permissions); "Common client error codes":
// DryRunOperation, HTTP 412. The checks are the ones the actions' handlers
// make before they change anything.
func (c *Cloud) DryRun(action string, form url.Values) *protocol.APIError {
	var err error
	switch action {
	case "CreateFleet":
		err = decodeThen(form, c.dryRunFleet)
	case "CreateLaunchTemplate":
		err = decodeThen(form, c.dryRunTemplate)
	case "TerminateInstances":
		err = decodeThen(form, func(in *ec2.TerminateInstancesInput) error {
			if len(in.InstanceIds) == 0 {
				return protocol.Errorf("MissingParameter", "The request must contain the parameter InstanceId")
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			return c.checkInstanceIDs(in.InstanceIds)
		})
	}
	if err != nil {
		return protocol.AsAPIError(err)
	}
	return &protocol.APIError{Code: "DryRunOperation", Status: http.StatusPreconditionFailed,
		Message: "Request would have succeeded, but DryRun flag is set."}
}

func decodeThen[I any](form url.Values, check func(*I) error) error {
	in := new(I)
	if err := wire.Decode(form, in); err != nil {
		return protocol.Errorf("InvalidParameterValue", "%s", err.Error())
	}
	return check(in)
}

// dryRunFleet: an instant fleet's tag types, its capacity and its launch
// templates, which must exist (CreateFleet's own checks).
func (c *Cloud) dryRunFleet(in *ec2.CreateFleetInput) error {
	if err := c.checkFleetTagTypes(in); err != nil {
		return err
	}
	if tcs := in.TargetCapacitySpecification; tcs == nil || aws.ToInt32(tcs.TotalTargetCapacity) < 1 {
		return protocol.Errorf("InvalidTargetCapacitySpecification", "TotalTargetCapacity must be at least 1")
	}
	if len(in.LaunchTemplateConfigs) == 0 {
		return protocol.Errorf("MissingParameter", "The request must contain the parameter LaunchTemplateConfigs")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cfg := range in.LaunchTemplateConfigs {
		if spec := cfg.LaunchTemplateSpecification; spec != nil {
			if _, err := c.resolveTemplate(spec.LaunchTemplateId, spec.LaunchTemplateName); err != nil {
				return err
			}
		}
	}
	return nil
}

// dryRunTemplate: CreateLaunchTemplate's checks of the name, the data's
// tag types, the tag specifications and the image.
func (c *Cloud) dryRunTemplate(in *ec2.CreateLaunchTemplateInput) error {
	name := aws.ToString(in.LaunchTemplateName)
	if !ltName.MatchString(name) {
		return protocol.Errorf("InvalidLaunchTemplateName.MalformedException", "Launch template name %q is malformed", name)
	}
	if in.LaunchTemplateData == nil {
		return protocol.Errorf("MissingParameter", "The request must contain the parameter LaunchTemplateData")
	}
	if err := c.checkTemplateTagTypes(in.LaunchTemplateData); err != nil {
		return err
	}
	for _, s := range in.TagSpecifications {
		if s.ResourceType != types.ResourceTypeLaunchTemplate {
			return notTaggable(s.ResourceType)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.templateByName(name) != nil {
		return protocol.Errorf("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	if id := aws.ToString(in.LaunchTemplateData.ImageId); id != "" && c.imageByID(id) == nil {
		return protocol.Errorf("InvalidAMIID.NotFound", "The image id '[%s]' does not exist", id)
	}
	return nil
}
