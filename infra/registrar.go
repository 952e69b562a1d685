package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/settings"
)

// registrarServiceTimeoutSeconds is how long CloudFormation waits for the
// registrar's answer to a custom resource request before failing it.
const registrarServiceTimeoutSeconds = 300

// registrarAsyncInvoke configures how Lambda retries the registrar.
// CloudFormation invokes a custom resource's function asynchronously (Lambda
// developer guide, "Using AWS Lambda with CloudFormation"), and the handler
// answers on the request's response URL (cfn.LambdaWrap), FAILED included:
// an invocation errors only when the answer could not be sent or the run
// crashed or timed out. Lambda's default would run the request again up to
// 3 minutes later and keep a throttled one for 6 hours, long after
// CloudFormation gave up (its ServiceTimeout) and, on a failed create,
// rolled back: a late Create would then put back the webhook configuration
// or RBAC the rollback's Delete had removed, and nothing would ever remove
// them. So no retries (CloudFormation fails the resource at its timeout and
// rolls back cleanly), and a request still queued when its run could no
// longer finish inside CloudFormation's wait is dropped: the event age is
// the service timeout less the function's timeout, at least Lambda's
// minimum of 60 s.
func (b *builder) registrarAsyncInvoke() {
	age := max(registrarServiceTimeoutSeconds-b.cfg.Sized("webhookregistrar").TimeoutSeconds, 60)
	b.Functions["webhookregistrar"].ConfigureAsyncInvoke(&awslambda.EventInvokeConfigOptions{
		MaxEventAge:   awscdk.Duration_Seconds(jsii.Number(float64(age))),
		RetryAttempts: jsii.Number(0),
	})
}

// registrarResource is one custom resource the webhookregistrar function
// serves, for this cluster. It needs the registrar's cluster access, so it
// depends on that access and role: created after them and, on delete,
// removed before them.
func (b *builder) registrarResource(id, resourceType string, props map[string]interface{}) awscdk.CustomResource {
	props["ClusterName"] = b.cfg.ClusterName
	b.trustProperties(resourceType, props)
	cr := awscdk.NewCustomResource(b.scope, jsii.String(id), &awscdk.CustomResourceProps{
		ServiceToken:   b.Functions["webhookregistrar"].FunctionArn(),
		ResourceType:   jsii.String(resourceType),
		ServiceTimeout: awscdk.Duration_Seconds(jsii.Number(registrarServiceTimeoutSeconds)),
		Properties:     &props,
	})
	cr.Node().AddDependency(b.registrarAccess)
	cr.Node().AddDependency(b.registrarRole)
	return cr
}

// trustProperties records a custom resource's properties for the
// registrar's environment: the CA bundle as its digest (Lambda's
// environment holds 4 KB in all).
func (b *builder) trustProperties(resourceType string, props map[string]interface{}) {
	trusted := map[string]interface{}{}
	for k, v := range props {
		if k == "CABundle" {
			k, v = admission.CABundleDigestProperty, admission.CABundleDigest(v.(string))
		}
		trusted[k] = v
	}
	if resourceType == "Custom::NodewrightAccess" {
		// Either mode's access resource is deleted naming this table at
		// most (functions/webhookregistrar, checkAccessDelete).
		trusted["StackTableName"] = b.Table.TableName()
	}
	if b.registrarTrust == nil {
		b.registrarTrust = map[string]map[string]interface{}{}
	}
	b.registrarTrust[resourceType] = trusted
}

// trustRegistrar gives the registrar the properties of its stack's custom
// resources: it refuses an invocation whose event says otherwise, so the
// right to invoke it is not the right to point the cluster's webhook, or
// the controllers' RBAC, anywhere else (functions/webhookregistrar,
// trust.go). Tokens (the function URL, the secret's and table's names)
// resolve at deploy time; none of them depends on the registrar.
func (b *builder) trustRegistrar() {
	if len(b.registrarTrust) == 0 {
		return
	}
	b.Functions["webhookregistrar"].AddEnvironment(jsii.String(settings.EnvRegistrarTrust), b.stack.ToJsonString(b.registrarTrust, nil), nil)
}
