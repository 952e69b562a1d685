package infra

import (
	"fmt"
	"strconv"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsevents"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseventstargets"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssecretsmanager"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/settings"
)

func (b *builder) webhook() {
	st := b.scope
	b.webhookSecret = awssecretsmanager.NewSecret(st, jsii.String("WebhookSecret"), &awssecretsmanager.SecretProps{
		Description: jsii.String("nodewright " + b.cfg.ClusterName + ": shared secret in the admission webhook URL path"),
		GenerateSecretString: &awssecretsmanager.SecretStringGenerator{
			PasswordLength:     jsii.Number(48),
			ExcludePunctuation: jsii.Bool(true),
			IncludeSpace:       jsii.Bool(false),
		},
	})
	b.webhookSecret.GrantRead(b.webhookRole, nil)
	b.webhookSecret.GrantRead(b.registrarRole, nil)
	wh := b.Functions["webhook"]
	wh.AddEnvironment(jsii.String(settings.EnvWebhookSecretARN), b.webhookSecret.SecretArn(), nil)
	wh.AddEnvironment(jsii.String(settings.EnvWebhookPrefix), jsii.String(WebhookPathPrefix), nil)

	// Auth NONE: the caller is kube-apiserver, which cannot SigV4-sign
	// requests; it authenticates with the secret in the path instead (see
	// README.md, "Why a function URL with auth NONE").
	b.functionURL = wh.AddFunctionUrl(&awslambda.FunctionUrlOptions{AuthType: awslambda.FunctionUrlAuthType_NONE})

	ca := b.cfg.WebhookCABundle
	if ca == "" {
		ca = amazonRootCAs
	}
	cr := b.registrarResource("WebhookRegistration", "Custom::NodewrightWebhook", map[string]interface{}{
		"WebhookName": dnsName("nodewright-", b.cfg.ClusterName),
		"FunctionUrl": b.functionURL.Url(),
		"PathPrefix":  WebhookPathPrefix,
		"SecretArn":   b.webhookSecret.SecretArn(),
		"CABundle":    ca,
		// Changing it re-registers the URL (after a secret rotation).
		"SecretGeneration": strconv.Itoa(b.cfg.WebhookSecretGeneration),
	})
	cr.Node().AddDependency(wh)
	b.webhookSecretRotation()
}

// webhookSecretRotation has the registrar rotate the webhook's secret on a
// schedule (functions/webhookregistrar, rotate.go): the secret cannot leave
// the URL, since a webhook's clientConfig has no headers and the API
// server cannot SigV4-sign for an AWS_IAM function URL, and the API server
// writes the URL into the error of every call that fails open.
func (b *builder) webhookSecretRotation() {
	days := b.cfg.WebhookSecretRotationDays
	if days <= 0 {
		return
	}
	awsevents.NewRule(b.scope, jsii.String("WebhookSecretRotation"), &awsevents.RuleProps{
		Description: jsii.String(fmt.Sprintf("nodewright %s: rotate the webhook secret every %d days", b.cfg.ClusterName, days)),
		Schedule:    awsevents.Schedule_Rate(awscdk.Duration_Days(jsii.Number(float64(days)))),
		Targets: &[]awsevents.IRuleTarget{awseventstargets.NewLambdaFunction(b.Functions["webhookregistrar"], &awseventstargets.LambdaFunctionProps{
			RetryAttempts: jsii.Number(0),
		})},
	})
	b.registrarRole.AddToPrincipalPolicy(awsiam.NewPolicyStatement(&awsiam.PolicyStatementProps{
		Sid:       jsii.String("RotateWebhookSecret"),
		Actions:   jsii.Strings("secretsmanager:PutSecretValue"),
		Resources: &[]*string{b.webhookSecret.SecretArn()},
	}))
}
