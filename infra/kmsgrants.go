package infra

import (
	"slices"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"
)

// EBS encryption with a customer managed key. EC2 creates and attaches the
// volumes of a launch with the launching principal's KMS rights: without
// them the instance is accepted and then terminates with
// Client.InvalidKMSKey.InvalidState (Karpenter troubleshooting, "Node
// terminates before ready on failed encrypted EBS volume"). The controller
// role gets what the Amazon EBS user guide lists for that principal
// (kms:CreateGrant, Decrypt, DescribeKey, GenerateDataKeyWithoutPlaintext,
// ReEncryptFrom/To), only on the keys the EC2NodeClasses name, only through EC2
// in the stack's region (kms:ViaService), and grants only for AWS resources
// (kms:GrantIsForAWSResource). No class names a key: no statement.

// ebsKeyUseActions are the key's actions besides CreateGrant.
// The guide's kms:ReEncrypt* is spelled out (ReEncryptFrom, ReEncryptTo):
// no wildcard action.
var ebsKeyUseActions = []string{"kms:Decrypt", "kms:DescribeKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:ReEncryptFrom", "kms:ReEncryptTo"}

// ebsKeys are the keys the EC2NodeClasses' block device mappings name: by
// key ID or key ARN (IAM matches the key's ARN), and by alias (IAM cannot
// name a key by alias in Resource; kms:ResourceAliases matches it).
type ebsKeys struct {
	arns    []string // ARNs, or Fn::Sub formats for key IDs in the stack's account
	aliases []string // "alias/name"
}

// splitKeyRefs sorts kmsKeyID values into ARNs and aliases, without duplicates.
func splitKeyRefs(refs []string) ebsKeys {
	var k ebsKeys
	for _, ref := range refs {
		switch {
		case strings.HasPrefix(ref, "alias/"):
			k.aliases = append(k.aliases, ref)
		case strings.HasPrefix(ref, "arn:") && strings.Contains(ref, ":alias/"):
			k.aliases = append(k.aliases, ref[strings.Index(ref, ":alias/")+1:])
		case strings.HasPrefix(ref, "arn:"):
			k.arns = append(k.arns, ref)
		case ref != "":
			k.arns = append(k.arns, "arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/"+ref)
		}
	}
	slices.Sort(k.arns)
	slices.Sort(k.aliases)
	k.arns, k.aliases = slices.Compact(k.arns), slices.Compact(k.aliases)
	return k
}

func (b *builder) ebsKeys() ebsKeys {
	var refs []string
	for _, c := range b.NodeConfig.NodeClasses {
		refs = append(refs, c.KMSKeys...)
	}
	return splitKeyRefs(refs)
}

// ebsKeyStatements grant EBS's use of the classes' keys through EC2, in a
// managed policy of their own: added to the role's default policy they
// push it past CloudFormation's inline size, and the overflow policy CDK
// then makes carries the construct's path in its description (a user's
// app would replace it).
func (p *controllerPolicy) ebsKeyStatements() {
	var statements []awsiam.PolicyStatement
	add := func(props *awsiam.PolicyStatementProps) {
		statements = append(statements, awsiam.NewPolicyStatement(props))
	}
	p.ebsKeyStatementsTo(add)
	if len(statements) == 0 {
		return
	}
	mp := awsiam.NewManagedPolicy(p.b.scope, jsii.String("EBSKeyAccess"), &awsiam.ManagedPolicyProps{
		Description: jsii.String("nodewright " + p.cluster + ": EBS's use of the EC2NodeClasses' KMS keys through EC2"),
		Statements:  &statements,
		Roles:       &[]awsiam.IRole{p.b.ControllerRole},
	})
	if len(p.b.ebsKeys().aliases) > 0 {
		suppress(mp, "AwsSolutions-IAM5", "An EC2NodeClass names its KMS key by alias: IAM cannot name a key by alias in Resource, so the key/* resource of this account and region is narrowed by kms:ResourceAliases to the aliases the classes name, and by kms:ViaService to EC2.")
	}
}

func (p *controllerPolicy) ebsKeyStatementsTo(add func(*awsiam.PolicyStatementProps)) {
	keys := p.b.ebsKeys()
	viaEC2 := map[string]interface{}{"kms:ViaService": p.b.sub("ec2.${AWS::Region}.amazonaws.com")}
	if len(keys.arns) > 0 {
		var res []*string
		for _, a := range keys.arns {
			res = append(res, p.b.sub(a))
		}
		kmsPair(add, "EBSKeys", res, map[string]interface{}{"StringEquals": viaEC2})
	}
	if len(keys.aliases) > 0 {
		res := []*string{p.b.sub("arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/*")}
		kmsPair(add, "EBSAliasedKeys", res, map[string]interface{}{
			"StringEquals":             viaEC2,
			"ForAnyValue:StringEquals": map[string]interface{}{"kms:ResourceAliases": keys.aliases},
		})
	}
}

// kmsPair adds the grant statement and the key-use statement on res.
func kmsPair(add func(*awsiam.PolicyStatementProps), sid string, res []*string, conditions map[string]interface{}) {
	grant := map[string]interface{}{"Bool": map[string]interface{}{"kms:GrantIsForAWSResource": "true"}}
	for k, v := range conditions {
		grant[k] = v
	}
	add(&awsiam.PolicyStatementProps{Sid: jsii.String(sid + "Grant"), Actions: jsii.Strings("kms:CreateGrant"), Resources: &res, Conditions: &grant})
	add(&awsiam.PolicyStatementProps{Sid: jsii.String(sid + "Use"), Actions: jsii.Strings(ebsKeyUseActions...), Resources: &res, Conditions: &conditions})
}
