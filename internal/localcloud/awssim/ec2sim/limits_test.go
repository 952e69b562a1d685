package ec2sim

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// The rules of limits.go, each against the source it names. The helpers
// are prefixed limits so that other test files of the package can have
// their own.

// limitsCloud is a region whose instances never leave pending (no timers).
func limitsCloud(t *testing.T) *Cloud {
	t.Helper()
	c, err := New(Config{Region: "us-west-2", ClusterName: "test", KubernetesVersion: "1.36", Seed: 7,
		After: func(time.Duration, func()) {}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func limitsCode(err error) string {
	var ae *protocol.APIError
	if errors.As(err, &ae) {
		return ae.Code
	}
	return ""
}

func limitsTag(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }

// limitsTags are n tags k0..k(n-1).
func limitsTags(prefix string, n int) []types.Tag {
	out := make([]types.Tag, n)
	for i := range out {
		out[i] = limitsTag(fmt.Sprintf("%s%d", prefix, i), "v")
	}
	return out
}

func limitsAMI(t *testing.T, c *Cloud) string {
	t.Helper()
	ami, ok := c.SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	if !ok {
		t.Fatal("no AL2023 AMI")
	}
	return ami
}

// limitsTemplate creates a template whose data is edited by mod.
func limitsTemplate(t *testing.T, c *Cloud, name string, mod func(*ec2.CreateLaunchTemplateInput)) error {
	t.Helper()
	in := &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(limitsAMI(t, c))}}
	if mod != nil {
		mod(in)
	}
	_, err := c.CreateLaunchTemplate(context.Background(), in)
	return err
}

// limitsFleet is an instant on-demand fleet of one m5.large from lt.
func limitsFleet(lt string, instanceTags []types.Tag) *ec2.CreateFleetInput {
	return &ec2.CreateFleetInput{
		Type: types.FleetTypeInstant,
		LaunchTemplateConfigs: []types.FleetLaunchTemplateConfigRequest{{
			LaunchTemplateSpecification: &types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(lt), Version: aws.String("$Latest")},
			Overrides:                   []types.FleetLaunchTemplateOverridesRequest{{InstanceType: "m5.large", AvailabilityZone: aws.String("us-west-2a")}},
		}},
		TargetCapacitySpecification: &types.TargetCapacitySpecificationRequest{TotalTargetCapacity: aws.Int32(1), DefaultTargetCapacityType: types.DefaultTargetCapacityTypeOnDemand},
		TagSpecifications:           []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: instanceTags}},
	}
}

func limitsLaunch(t *testing.T, c *Cloud, in *ec2.CreateFleetInput) (string, error) {
	t.Helper()
	out, err := c.CreateFleet(context.Background(), in)
	if err != nil {
		return "", err
	}
	if len(out.Instances) != 1 || len(out.Instances[0].InstanceIds) != 1 {
		t.Fatalf("fleet launched no instance: %+v", out.Errors)
	}
	return out.Instances[0].InstanceIds[0], nil
}

// TestRuleTagLimits: EC2 user guide, "Tag restrictions" (50 user tags per
// resource, keys up to 128 and values up to 256 characters); the CreateTags
// API reference ("Each resource can have a maximum of 50 tags").
func TestRuleTagLimits(t *testing.T) {
	c := limitsCloud(t)
	if err := limitsTemplate(t, c, "lt-limits", nil); err != nil {
		t.Fatal(err)
	}
	bg := context.Background()

	// CreateFleet's tag specifications.
	if _, err := limitsLaunch(t, c, limitsFleet("lt-limits", limitsTags("k", 51))); limitsCode(err) != "TagLimitExceeded" {
		t.Errorf("fleet tagging instances with 51 tags: %v, want TagLimitExceeded", err)
	}
	// Two specifications of one type tag the same instances: 26 + 25 keys.
	split := limitsFleet("lt-limits", limitsTags("a", 26))
	split.TagSpecifications = append(split.TagSpecifications, types.TagSpecification{ResourceType: types.ResourceTypeInstance, Tags: limitsTags("b", 25)})
	if _, err := limitsLaunch(t, c, split); limitsCode(err) != "TagLimitExceeded" {
		t.Errorf("fleet tagging instances with 26+25 tags: %v, want TagLimitExceeded", err)
	}
	longKey, longValue := strings.Repeat("k", 129), strings.Repeat("v", 257)
	if _, err := limitsLaunch(t, c, limitsFleet("lt-limits", []types.Tag{limitsTag(longKey, "v")})); limitsCode(err) != "InvalidParameterValue" ||
		!strings.Contains(err.Error(), "Tag key exceeds the maximum length of 128 characters") || !strings.Contains(err.Error(), longKey) {
		t.Errorf("fleet tag key of 129 characters: %v, want InvalidParameterValue naming it", err)
	}
	if _, err := limitsLaunch(t, c, limitsFleet("lt-limits", []types.Tag{limitsTag("big", longValue)})); limitsCode(err) != "InvalidParameterValue" ||
		!strings.Contains(err.Error(), "Tag value exceeds the maximum length of 256 characters") || !strings.Contains(err.Error(), "(big)") {
		t.Errorf("fleet tag value of 257 characters: %v, want InvalidParameterValue naming its key", err)
	}
	// Characters, not bytes: 128 two-byte runes are a valid key.
	atLimit := append(limitsTags("k", 48), limitsTag(strings.Repeat("é", 128), strings.Repeat("v", 256)), limitsTag("aws-ok", "v"))
	id, err := limitsLaunch(t, c, limitsFleet("lt-limits", atLimit))
	if err != nil {
		t.Fatalf("fleet with 50 tags at the length limits: %v", err)
	}

	// Launch template data and the template's own tags.
	data := func(n int) func(*ec2.CreateLaunchTemplateInput) {
		return func(in *ec2.CreateLaunchTemplateInput) {
			in.LaunchTemplateData.TagSpecifications = []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeNetworkInterface, Tags: limitsTags("k", n)}}
		}
	}
	if err := limitsTemplate(t, c, "lt-data-51", data(51)); limitsCode(err) != "TagLimitExceeded" {
		t.Errorf("template data tagging interfaces with 51 tags: %v, want TagLimitExceeded", err)
	}
	if err := limitsTemplate(t, c, "lt-data-50", data(50)); err != nil {
		t.Errorf("template data tagging interfaces with 50 tags: %v", err)
	}
	own := func(in *ec2.CreateLaunchTemplateInput) {
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate, Tags: []types.Tag{limitsTag("big", longValue)}}}
	}
	if err := limitsTemplate(t, c, "lt-own-long", own); limitsCode(err) != "InvalidParameterValue" {
		t.Errorf("template tagged with a 257-character value: %v, want InvalidParameterValue", err)
	}

	// CreateTags counts the tags the resource has: the instance has 50
	// user tags (and EC2's aws: tags, which do not count).
	if _, err := c.CreateTags(bg, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{limitsTag("one-more", "v")}}); limitsCode(err) != "TagLimitExceeded" ||
		!strings.Contains(err.Error(), "The maximum number of Tags for a resource has been reached.") {
		t.Errorf("CreateTags of a 51st tag: %v, want TagLimitExceeded", err)
	}
	if _, err := c.CreateTags(bg, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{limitsTag("k0", "changed")}}); err != nil {
		t.Errorf("CreateTags overwriting one of the 50: %v", err)
	}
	if _, err := c.CreateTags(bg, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{limitsTag(longKey, "v")}}); limitsCode(err) != "InvalidParameterValue" {
		t.Errorf("CreateTags of a 129-character key: %v, want InvalidParameterValue", err)
	}
	few, err := limitsLaunch(t, c, limitsFleet("lt-limits", limitsTags("k", 10)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateTags(bg, &ec2.CreateTagsInput{Resources: []string{few}, Tags: limitsTags("n", 41)}); limitsCode(err) != "TagLimitExceeded" {
		t.Errorf("CreateTags of 41 tags on an instance with 10: %v, want TagLimitExceeded", err)
	}
	if _, err := c.CreateTags(bg, &ec2.CreateTagsInput{Resources: []string{few}, Tags: limitsTags("n", 40)}); err != nil {
		t.Errorf("CreateTags of 40 tags on an instance with 10: %v", err)
	}
}

// TestRuleReservedTagPrefix: EC2 user guide, "Tag restrictions" (the aws:
// prefix, in any case, is reserved).
func TestRuleReservedTagPrefix(t *testing.T) {
	c := limitsCloud(t)
	if err := limitsTemplate(t, c, "lt-reserved", nil); err != nil {
		t.Fatal(err)
	}
	const msg = "Tag keys starting with 'aws:' are reserved for internal use"
	for _, k := range []string{"aws:owner", "AWS:Owner", "Aws:x"} {
		if _, err := limitsLaunch(t, c, limitsFleet("lt-reserved", []types.Tag{limitsTag(k, "v")})); limitsCode(err) != "InvalidParameterValue" || !strings.Contains(err.Error(), msg) {
			t.Errorf("fleet tag %q: %v, want InvalidParameterValue %q", k, err, msg)
		}
	}
	data := func(in *ec2.CreateLaunchTemplateInput) {
		in.LaunchTemplateData.TagSpecifications = []types.LaunchTemplateTagSpecificationRequest{{ResourceType: types.ResourceTypeInstance, Tags: []types.Tag{limitsTag("aws:x", "v")}}}
	}
	if err := limitsTemplate(t, c, "lt-reserved-data", data); limitsCode(err) != "InvalidParameterValue" {
		t.Errorf("template data tag aws:x: %v, want InvalidParameterValue", err)
	}
	own := func(in *ec2.CreateLaunchTemplateInput) {
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeLaunchTemplate, Tags: []types.Tag{limitsTag("AWS:x", "v")}}}
	}
	if err := limitsTemplate(t, c, "lt-reserved-own", own); limitsCode(err) != "InvalidParameterValue" {
		t.Errorf("template tag AWS:x: %v, want InvalidParameterValue", err)
	}
	id, err := limitsLaunch(t, c, limitsFleet("lt-reserved", []types.Tag{limitsTag("awsx:ok", "v"), limitsTag("my-aws:ok", "aws:value")}))
	if err != nil {
		t.Fatalf("keys that only contain aws: %v", err)
	}
	if _, err := c.CreateTags(context.Background(), &ec2.CreateTagsInput{Resources: []string{id}, Tags: []types.Tag{limitsTag("aWs:x", "v")}}); limitsCode(err) != "InvalidParameterValue" {
		t.Errorf("CreateTags aWs:x: %v, want InvalidParameterValue", err)
	}
}

// TestRuleUserDataSize: EC2 user guide, "User data is limited to 16 KB, in
// raw form, before it is base64-encoded"; CreateLaunchTemplate refuses it
// with InvalidUserData.Malformed (kubernetes/kops #10202).
func TestRuleUserDataSize(t *testing.T) {
	c := limitsCloud(t)
	userData := func(n int) func(*ec2.CreateLaunchTemplateInput) {
		return func(in *ec2.CreateLaunchTemplateInput) {
			in.LaunchTemplateData.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("#", n))))
		}
	}
	// 16384 raw bytes are 21848 in base64: the raw size is what counts.
	if err := limitsTemplate(t, c, "lt-ud-16384", userData(16384)); err != nil {
		t.Errorf("template with 16384 bytes of user data: %v", err)
	}
	err := limitsTemplate(t, c, "lt-ud-16385", userData(16385))
	if limitsCode(err) != "InvalidUserData.Malformed" || !strings.Contains(err.Error(), "User data is limited to 16384 bytes.") {
		t.Errorf("template with 16385 bytes of user data: %v, want InvalidUserData.Malformed", err)
	}
	// The fleet's own user data for its template (instant fleets).
	if err := limitsTemplate(t, c, "lt-ud", nil); err != nil {
		t.Fatal(err)
	}
	in := limitsFleet("lt-ud", nil)
	in.LaunchTemplateConfigs[0].LaunchTemplateSpecification.LaunchTemplateSpecificationUserData = aws.String(base64.StdEncoding.EncodeToString([]byte(strings.Repeat("#", 16385))))
	if _, err := c.CreateFleet(context.Background(), in); limitsCode(err) != "InvalidParameterValue" || !strings.Contains(err.Error(), "User data is limited to 16384 bytes") {
		t.Errorf("fleet with 16385 bytes of user data: %v, want InvalidParameterValue", err)
	}
}

// TestRuleClientTokenLength: EC2 API reference, "Ensuring idempotency" (a
// client token of up to 64 ASCII characters); CreateLaunchTemplate's
// ClientToken ("Maximum 128 ASCII characters").
func TestRuleClientTokenLength(t *testing.T) {
	c := limitsCloud(t)
	if err := limitsTemplate(t, c, "lt-token", nil); err != nil {
		t.Fatal(err)
	}
	fleet := func(token string) error {
		in := limitsFleet("lt-token", nil)
		in.ClientToken = aws.String(token)
		_, err := limitsLaunch(t, c, in)
		return err
	}
	if err := fleet(strings.Repeat("t", 64)); err != nil {
		t.Errorf("fleet with a 64-character token: %v", err)
	}
	for name, token := range map[string]string{"65 characters": strings.Repeat("t", 65), "not ASCII": "tökén"} {
		if err := fleet(token); limitsCode(err) != "InvalidParameterValue" || !strings.Contains(err.Error(), "clientToken") {
			t.Errorf("fleet with a token of %s: %v, want InvalidParameterValue on clientToken", name, err)
		}
	}
	token := func(n int) func(*ec2.CreateLaunchTemplateInput) {
		return func(in *ec2.CreateLaunchTemplateInput) { in.ClientToken = aws.String(strings.Repeat("t", n)) }
	}
	if err := limitsTemplate(t, c, "lt-token-128", token(128)); err != nil {
		t.Errorf("template with a 128-character token: %v", err)
	}
	if err := limitsTemplate(t, c, "lt-token-129", token(129)); limitsCode(err) != "InvalidParameterValue" {
		t.Errorf("template with a 129-character token: %v, want InvalidParameterValue", err)
	}
}
