package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/constructs-go/constructs/v10"
	"github.com/aws/jsii-runtime-go"
	"github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// ApplyNag runs cdk-nag's AwsSolutions pack over scope at synth. Findings
// are errors on the constructs; TestNag fails on any that is not suppressed.
func ApplyNag(scope constructs.IConstruct) {
	awscdk.Aspects_Of(scope).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
}

func suppress(c constructs.IConstruct, id, reason string) {
	cdknag.NagSuppressions_AddResourceSuppressions(c, &[]*cdknag.NagPackSuppression{{
		Id: jsii.String(id), Reason: jsii.String(reason),
	}}, jsii.Bool(true))
}

// suppressNagFindings records, per construct, why an AwsSolutions rule does
// not apply. Each reason is the design decision, not a shrug.
func suppressNagFindings(b *builder) {
	suppress(b.NodeRole, "AwsSolutions-IAM4",
		"EKS nodes need exactly these AWS managed policies (worker node, VPC CNI, ECR pull-only, SSM); AWS maintains them as EKS evolves, as Karpenter's node role does.")
	if b.vpc != nil {
		for _, r := range []constructs.IConstruct{b.ControllerRole, b.registrarRole} {
			suppress(r, "AwsSolutions-IAM4",
				"AWSLambdaVPCAccessExecutionRole is the managed policy Lambda requires for VPC ENIs when the cluster endpoint is private; its ec2:*NetworkInterface actions do not support resource scoping.")
		}
	}
	suppress(b.ControllerRole, "AwsSolutions-IAM5",
		"Wildcards are bounded by conditions or by AWS limits: instance/volume/fleet/launch-template ARNs are unknown before launch and are gated by aws:RequestTag "+
			"(create) or aws:ResourceTag (terminate/delete) for this cluster; ec2:Describe* support no resource-level permissions and are pinned to the region; "+
			"pricing:GetProducts has no resources; ssm:GetParameter is limited to AWS's public /aws/service/* parameters; table index/* and log-stream :* are "+
			"this stack's own table indexes and log groups; images, snapshots, subnets and security groups are only referenced by a tagged launch.")
	if b.webhookSecret != nil {
		suppress(b.webhookSecret, "AwsSolutions-SMG4",
			"The secret is part of the registered webhook URL: rotating it must re-register the ValidatingWebhookConfiguration, which the stack does on "+
				"deploy with a new webhookSecretGeneration (README: rotating the webhook secret). An automatic rotation Lambda would break the webhook until then.")
	}
}
