package ec2sim

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
)

// invalidKMSKeyReason is the state reason of an instance whose encrypted
// volume's key EBS could not use: EC2 accepts the launch, validates the
// key asynchronously and terminates the pending instance (rule kms-grant;
// sources in ../kms.go).
const invalidKMSKeyReason = "Client.InvalidKMSKey.InvalidState: The KMS key provided is in an incorrect state"

// encryptedVolumeKeys lists the KMS keys a launch template's encrypted EBS
// volumes name. An encrypted volume without a key uses the account's
// default EBS key, which the simulator models as AWS managed (usable).
func encryptedVolumeKeys(data *types.RequestLaunchTemplateData) []string {
	var out []string
	for _, m := range data.BlockDeviceMappings {
		if m.Ebs == nil || !aws.ToBool(m.Ebs.Encrypted) || aws.ToString(m.Ebs.KmsKeyId) == "" {
			continue
		}
		out = append(out, aws.ToString(m.Ebs.KmsKeyId))
	}
	return out
}

// volumeKeysUsable asks the account whether the request's caller may have
// EBS use every key (nil when the rule is off or no account answers).
func (c *Cloud) volumeKeysUsable(ctx context.Context, keys []string) error {
	usable := c.cfg.AccountState.VolumeKeyUsable
	if usable == nil || !c.cfg.Rules.On(fidelity.KMSGrant) {
		return nil
	}
	for _, k := range keys {
		if err := usable(ctx, k); err != nil {
			return err // the account logs why
		}
	}
	return nil
}
