package ec2sim

import (
	"encoding/base64"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// EC2's size limits on what a request carries: tags, user data and client
// tokens. Each rule names its source; FIDELITY.md lists them with the
// tests that show them (limits_test.go).

// The tag limits. Source: the EC2 user guide, "Tag restrictions" (50 tags
// per resource; keys up to 128 and values up to 256 Unicode characters in
// UTF-8; "The aws: prefix is prohibited for tags; it's reserved for AWS
// use ... Tags with this prefix do not count against your tags per
// resource quota", the wording AWS's service guides share, e.g. the
// MediaConnect user guide's "Tag naming and usage conventions"). The
// CreateTags API reference: "Each resource can have a maximum of 50 tags."
const (
	maxTagsPerResource = 50
	maxTagKeyLength    = 128
	maxTagValueLength  = 256
)

// maxUserDataBytes is the user data limit. Source: the EC2 user guide,
// "Run commands when you launch an EC2 instance with user data input":
// "User data is limited to 16 KB, in raw form, before it is
// base64-encoded."; the API reference of RequestLaunchTemplateData
// (UserData) and FleetLaunchTemplateSpecificationRequest
// (LaunchTemplateSpecificationUserData) say the same.
const maxUserDataBytes = 16384

// The client token limits. Source: the EC2 API reference, "Ensuring
// idempotency in Amazon EC2 API requests": "A client token is a unique,
// case-sensitive string of up to 64 ASCII characters"; the RunInstances
// reference: "Constraints: Maximum 64 ASCII characters". CreateLaunchTemplate
// allows more: its API reference, ClientToken: "Constraint: Maximum 128
// ASCII characters."
const (
	maxClientTokenLength         = 64
	maxTemplateClientTokenLength = 128
)

// isReservedTagKey reports a key of the aws: prefix in any case. Source:
// the EC2 user guide, "Tag restrictions", and for the case, the shared
// wording of AWS's service guides (the EMR Serverless user guide,
// "Tagging limitations": "Do not use AWS: or any upper or lowercase
// combination of such as a prefix for either keys or values. These are
// reserved only for AWS use.").
func isReservedTagKey(k string) bool {
	return len(k) >= 4 && strings.EqualFold(k[:4], "aws:")
}

// tagLimitExceeded is EC2's answer to a resource given more than 50 user
// tags. The code is in the EC2 API reference's client error codes
// ("TagLimitExceeded: You've reached the limit on the number of tags that
// you can assign to the specified resource"); the message is moto's and
// Eucalyptus's (both reimplement EC2's CreateTags; getmoto/moto
// moto/ec2/exceptions.py), not a captured AWS response. That a create call
// (a fleet's or a template's tag specifications) answers the same is
// assumed.
func tagLimitExceeded() error {
	return protocol.Errorf("TagLimitExceeded", "The maximum number of Tags for a resource has been reached.")
}

// checkTags refuses tags EC2 refuses on any call that sets them: an aws:
// key (reserved-tag-prefix), a key over 128 or a value over 256 characters
// (tag-limits).
//
// Messages: "Tag keys starting with 'aws:' are reserved for internal use",
// "Tag key exceeds the maximum length of 128 characters" and "Tag value
// exceeds the maximum length of 256 characters" are EC2's wording as the
// OpenStack ec2-api reimplementation of EC2 gives it (ec2api/api/tag.py,
// then at the older 127 and 255 limits) inside EC2's InvalidParameterValue
// shape "Value (...) for parameter ... is invalid. <reason>"; the value
// message at 256 is quoted by iriusrisk/GoCD-EC2-Elastic-Agent-Plugin #24
// from a real launch. Naming the tag by its key in "Value (...)" is assumed.
func (c *Cloud) checkTags(tags []types.Tag) error {
	for _, t := range tags {
		k, v := aws.ToString(t.Key), aws.ToString(t.Value)
		if isReservedTagKey(k) && c.cfg.Rules.On(fidelity.ReservedTagPrefix) {
			return protocol.Errorf("InvalidParameterValue", "Tag keys starting with 'aws:' are reserved for internal use")
		}
		if !c.cfg.Rules.On(fidelity.TagLimits) {
			continue
		}
		if utf8.RuneCountInString(k) > maxTagKeyLength {
			return protocol.Errorf("InvalidParameterValue", "Value (%s) for parameter Tag is invalid. Tag key exceeds the maximum length of %d characters", k, maxTagKeyLength)
		}
		if utf8.RuneCountInString(v) > maxTagValueLength {
			return protocol.Errorf("InvalidParameterValue", "Value (%s) for parameter Tag is invalid. Tag value exceeds the maximum length of %d characters", k, maxTagValueLength)
		}
	}
	return nil
}

// userTagCount counts the distinct keys of tags that count against the
// 50: all but those of the aws: prefix.
func userTagCount(tags ...[]types.Tag) int {
	keys := map[string]bool{}
	for _, ts := range tags {
		for _, t := range ts {
			if k := aws.ToString(t.Key); !isReservedTagKey(k) {
				keys[k] = true
			}
		}
	}
	return len(keys)
}

// checkTagSpecs checks the tags a create call gives each resource type:
// each tag, then the count per resource (the specifications of one type
// all tag the same resources).
func (c *Cloud) checkTagSpecs(byType map[types.ResourceType][][]types.Tag) error {
	for _, lists := range byType {
		for _, tags := range lists {
			if err := c.checkTags(tags); err != nil {
				return err
			}
		}
		if c.cfg.Rules.On(fidelity.TagLimits) && userTagCount(lists...) > maxTagsPerResource {
			return tagLimitExceeded()
		}
	}
	return nil
}

// checkUserDataSize refuses base64 user data of more than 16 KB once
// decoded. Data that is not base64 is left to other checks (the simulator
// does not model InvalidUserData.Malformed's "Invalid BASE64 encoding").
func (c *Cloud) checkUserDataSize(b64 *string, code string) error {
	if b64 == nil || !c.cfg.Rules.On(fidelity.UserDataSize) {
		return nil
	}
	raw, err := base64.StdEncoding.DecodeString(*b64)
	if err != nil || len(raw) <= maxUserDataBytes {
		return nil
	}
	return protocol.Errorf(code, "User data is limited to %d bytes.", maxUserDataBytes)
}

// checkClientToken refuses a client token longer than max or not ASCII.
// The code is the EC2 API's for a malformed parameter; the message is
// assumed (no AWS response for it was found).
func (c *Cloud) checkClientToken(token *string, max int) error {
	if token == nil || !c.cfg.Rules.On(fidelity.ClientTokenLength) {
		return nil
	}
	t := *token
	ascii := true
	for i := 0; i < len(t); i++ {
		if t[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if len(t) > max || !ascii {
		return protocol.Errorf("InvalidParameterValue", "Value (%s) for parameter clientToken is invalid. The client token must be at most %d ASCII characters.", t, max)
	}
	return nil
}

// checkFleetLimits is CreateFleet's share of the limits: its client token,
// the tags of its tag specifications and the user data its launch template
// specifications may carry (LaunchTemplateSpecificationUserData). That
// RunInstances's InvalidParameterValue for oversized user data
// (kubermatic/kubermatic #144, k0sproject/k0smotron #892) is CreateFleet's
// too is assumed.
func (c *Cloud) checkFleetLimits(in *ec2.CreateFleetInput) error {
	if err := c.checkClientToken(in.ClientToken, maxClientTokenLength); err != nil {
		return err
	}
	byType := map[types.ResourceType][][]types.Tag{}
	for _, s := range in.TagSpecifications {
		byType[s.ResourceType] = append(byType[s.ResourceType], s.Tags)
	}
	if err := c.checkTagSpecs(byType); err != nil {
		return err
	}
	for _, cfg := range in.LaunchTemplateConfigs {
		if s := cfg.LaunchTemplateSpecification; s != nil {
			if err := c.checkUserDataSize(s.LaunchTemplateSpecificationUserData, "InvalidParameterValue"); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTemplateLimits is CreateLaunchTemplate's share: its client token,
// the tags of the template and of its launches, and its user data. EC2
// refuses oversized user data when the template is made, with
// InvalidUserData.Malformed: kubernetes/kops #10202 ("error creating
// LaunchTemplate: InvalidUserData.Malformed: User data is limited to 16384
// bytes.") and github-aws-runners/terraform-aws-github-runner #3700 (the
// same from CreateLaunchTemplateVersion).
func (c *Cloud) checkTemplateLimits(in *ec2.CreateLaunchTemplateInput) error {
	if err := c.checkClientToken(in.ClientToken, maxTemplateClientTokenLength); err != nil {
		return err
	}
	byType := map[types.ResourceType][][]types.Tag{}
	for _, s := range in.TagSpecifications {
		byType[s.ResourceType] = append(byType[s.ResourceType], s.Tags)
	}
	if err := c.checkTagSpecs(byType); err != nil {
		return err
	}
	data := map[types.ResourceType][][]types.Tag{}
	for _, s := range in.LaunchTemplateData.TagSpecifications {
		data[s.ResourceType] = append(data[s.ResourceType], s.Tags)
	}
	if err := c.checkTagSpecs(data); err != nil {
		return err
	}
	return c.checkUserDataSize(in.LaunchTemplateData.UserData, "InvalidUserData.Malformed")
}

// checkTagTotals refuses a CreateTags that would leave a resource with
// more than 50 user tags: its tags after the call (existing keys are
// overwritten, not added) count. Caller holds mu.
func (c *Cloud) checkTagTotals(targets []*[]types.Tag, add []types.Tag) error {
	if !c.cfg.Rules.On(fidelity.TagLimits) {
		return nil
	}
	for _, p := range targets {
		if userTagCount(*p, add) > maxTagsPerResource {
			return tagLimitExceeded()
		}
	}
	return nil
}
