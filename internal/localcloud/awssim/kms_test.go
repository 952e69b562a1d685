package awssim

import (
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// TestRuleKMSGrant (rule kms-grant): a launch whose encrypted volume names
// a customer managed key is accepted, and its instance runs only when EBS
// may use the key with the caller's rights: the key policy delegates to
// IAM (or names the caller) and the caller's policy allows the key's EBS
// actions through EC2. Otherwise, or for a disabled or unknown key, the
// instance goes pending -> terminated with Client.InvalidKMSKey.InvalidState.
func TestRuleKMSGrant(t *testing.T) {
	s, cfg := newTestServer(t, nil)
	admin := ec2.NewFromConfig(cfg)
	const granted, other, keyOnly, disabled = "1111aaaa-0000-0000-0000-000000000001", "2222bbbb-0000-0000-0000-000000000002",
		"3333cccc-0000-0000-0000-000000000003", "4444dddd-0000-0000-0000-000000000004"
	roleARN := "arn:aws:iam::" + s.Options().AccountID + ":role/launcher"
	s.AddKMSKey(KMSKey{ID: granted, Aliases: []string{"alias/nodes"}})
	s.AddKMSKey(KMSKey{ID: other})
	s.AddKMSKey(KMSKey{ID: keyOnly, KeyPolicyWithoutIAM: true, Principals: []string{roleARN}})
	s.AddKMSKey(KMSKey{ID: disabled, Disabled: true})
	policy, err := iam.ParsePolicyJSON("launch", []byte(`{"Version":"2012-10-17","Statement":[
		{"Sid":"Launch","Effect":"Allow","Action":["ec2:CreateFleet","ec2:RunInstances","ec2:CreateTags"],"Resource":"*"},
		{"Sid":"Grant","Effect":"Allow","Action":"kms:CreateGrant","Resource":"`+s.KMSKeyARN(granted)+`",
		 "Condition":{"StringEquals":{"kms:ViaService":"ec2.us-west-2.amazonaws.com"},"Bool":{"kms:GrantIsForAWSResource":"true"}}},
		{"Sid":"Use","Effect":"Allow","Action":["kms:Decrypt","kms:GenerateDataKeyWithoutPlaintext","kms:DescribeKey"],"Resource":"`+s.KMSKeyARN(granted)+`",
		 "Condition":{"StringEquals":{"kms:ViaService":"ec2.us-west-2.amazonaws.com"}}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s.AddRole("AKIDKMSLAUNCH", "secret", "arn:aws:sts::"+s.Options().AccountID+":assumed-role/launcher/test",
		Role{ARN: roleARN, Policies: []*iam.Policy{policy}})
	roleCfg := cfg.Copy()
	roleCfg.Credentials = credentials.NewStaticCredentialsProvider("AKIDKMSLAUNCH", "secret", "")
	c := ec2.NewFromConfig(roleCfg)

	for _, tc := range []struct {
		name, key string
		want      types.InstanceStateName
	}{
		{"key the policy grants, by ARN", s.KMSKeyARN(granted), types.InstanceStateNameRunning},
		{"key the policy grants, by alias", "alias/nodes", types.InstanceStateNameRunning},
		{"key only its key policy grants", keyOnly, types.InstanceStateNameRunning},
		{"no encryption key at all", "", types.InstanceStateNameRunning},
		{"key the policy does not grant", s.KMSKeyARN(other), types.InstanceStateNameTerminated},
		{"disabled key", disabled, types.InstanceStateNameTerminated},
		{"unknown key", "9999ffff-0000-0000-0000-000000000009", types.InstanceStateNameTerminated},
	} {
		lt := encryptedTemplate(t, s, admin, "kms-"+strings.NewReplacer(" ", "-", ",", "").Replace(tc.name), tc.key)
		out, err := c.CreateFleet(ctx(t), fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a")))
		if err != nil || len(out.Instances) != 1 {
			t.Fatalf("%s: the launch call itself succeeds (EC2 checks the key later): %+v, %v", tc.name, out, err)
		}
		inst := settledInstance(t, admin, out.Instances[0].InstanceIds[0])
		if inst.State.Name != tc.want {
			t.Errorf("%s: instance %s, want %s", tc.name, inst.State.Name, tc.want)
			continue
		}
		if tc.want == types.InstanceStateNameTerminated && aws.ToString(inst.StateReason.Code) != "Client.InvalidKMSKey.InvalidState" {
			t.Errorf("%s: state reason %+v, want Client.InvalidKMSKey.InvalidState", tc.name, inst.StateReason)
		}
	}
	var grants int
	for _, d := range s.Denials() {
		if d.Action == "kms:CreateGrant" && d.Resource == s.KMSKeyARN(other) {
			grants++
		}
	}
	if grants != 1 {
		t.Errorf("%d kms:CreateGrant denials on the ungranted key, want 1: %v", grants, s.Denials())
	}
}

// encryptedTemplate is a launch template whose root volume is encrypted
// under key ("": not encrypted).
func encryptedTemplate(t *testing.T, s *Server, c *ec2.Client, name, key string) string {
	t.Helper()
	ami, _ := s.EC2().SSMParameter("/aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id")
	ebs := &types.LaunchTemplateEbsBlockDeviceRequest{VolumeSize: aws.Int32(20), VolumeType: types.VolumeTypeGp3}
	if key != "" {
		ebs.Encrypted, ebs.KmsKeyId = aws.Bool(true), aws.String(key)
	}
	if _, err := c.CreateLaunchTemplate(ctx(t), &ec2.CreateLaunchTemplateInput{LaunchTemplateName: aws.String(name),
		LaunchTemplateData: &types.RequestLaunchTemplateData{ImageId: aws.String(ami),
			BlockDeviceMappings: []types.LaunchTemplateBlockDeviceMappingRequest{{DeviceName: aws.String("/dev/xvda"), Ebs: ebs}}}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// settledInstance waits for an instance to leave pending.
func settledInstance(t *testing.T, c *ec2.Client, id string) types.Instance {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		inst := out.Reservations[0].Instances[0]
		if inst.State.Name != types.InstanceStateNamePending || time.Now().After(deadline) {
			return inst
		}
		time.Sleep(20 * time.Millisecond)
	}
}
