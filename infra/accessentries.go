package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/settings"
)

// EKS access policy ARNs are global: arn:<partition>:eks::aws:cluster-access-policy/<name>.
func (b *builder) accessPolicy(name string) *string {
	return b.sub("arn:${AWS::Partition}:eks::aws:cluster-access-policy/" + name)
}

// clusterAdmin is the access policy of a cluster-admin entry.
func (b *builder) clusterAdmin() *[]interface{} {
	return &[]interface{}{&awseks.CfnAccessEntry_AccessPolicyProperty{
		PolicyArn:   b.accessPolicy("AmazonEKSClusterAdminPolicy"),
		AccessScope: &awseks.CfnAccessEntry_AccessScopeProperty{Type: jsii.String("cluster")},
	}}
}

func (b *builder) accessEntries() {
	if b.cfg.Shadow() {
		b.shadowAccessEntry()
		return
	}
	st := b.scope
	b.nodeAccessEntries()
	ctrl := &awseks.CfnAccessEntryProps{
		ClusterName:  jsii.String(b.cfg.ClusterName),
		PrincipalArn: b.ControllerRole.RoleArn(),
		Type:         jsii.String("STANDARD"),
	}
	if b.cfg.EKSAccess == AccessClusterAdmin {
		ctrl.AccessPolicies = b.clusterAdmin()
	} else {
		ctrl.KubernetesGroups = jsii.Strings(access.ControllerGroup)
	}
	b.controllerAccess = awseks.NewCfnAccessEntry(st, jsii.String("ControllerAccessEntry"), ctrl)
	b.registrarAccessEntry()
	b.controllersWaitFor(b.registrarResource("ControllerAccess", "Custom::NodewrightAccess", map[string]interface{}{
		// Per stack: another stack for the same cluster keeps its own.
		"Name": dnsName("nodewright-controller-", *b.stack.StackName()),
		// On delete (the stack's, as the name never changes), its claims
		// name the Nodes whose termination finalizer the registrar
		// releases once the controllers are gone.
		"TableName": b.Table.TableName(),
	}))
}

// registrarAccessEntry gives the registrar's role cluster-admin. The
// registrar creates the controllers' (or shadow mode's) ClusterRole and
// binding, and the API server lets only a holder of every right a role
// grants (or of escalate and bind, cluster-admin in effect) create one: no
// narrower EKS access policy can. Only its own function runs with its role.
func (b *builder) registrarAccessEntry() {
	b.registrarAccess = awseks.NewCfnAccessEntry(b.scope, jsii.String("WebhookRegistrarAccessEntry"), &awseks.CfnAccessEntryProps{
		ClusterName:    jsii.String(b.cfg.ClusterName),
		PrincipalArn:   b.registrarRole.RoleArn(),
		Type:           jsii.String("STANDARD"),
		AccessPolicies: b.clusterAdmin(),
	})
}

// controllersWaitFor makes the controllers wait for their access entry
// and RBAC: they must not run before they can reach the cluster, and (on
// delete) must stop before their access goes.
func (b *builder) controllersWaitFor(rbac awscdk.CustomResource) {
	for _, fn := range []string{"provisioner", "interruption", "disruption", "lifecycle"} {
		b.Functions[fn].Node().AddDependency(b.controllerAccess)
		b.Functions[fn].Node().AddDependency(rbac)
	}
}

// shadowAccessEntry gives the controller role read access to the cluster
// and nothing else: its access entry maps it to access.ShadowGroup, which
// the registrar binds to access.ShadowClusterRole, the reads the
// controllers make (Nodes, Pods, PDBs, volumes...) without a write or a
// Secret. No EKS access policy fits: AmazonEKSAdminViewPolicy reads every
// Secret, and AmazonEKSViewPolicy, which excludes them, reads no Nodes,
// PersistentVolumes or StorageClasses, which shadow mode's planning needs
// (EKS user guide, "Review access policy permissions"). So the registrar
// holds cluster-admin in shadow mode too, to create the RBAC objects. No
// node access entries (shadow mode launches no node) and no webhook.
//
// The RBAC objects are named apart from normal mode's, so switching modes
// replaces the custom resource: the old one's Delete removes the other
// mode's rights (and, leaving normal mode, releases the Nodes' finalizers,
// which shadow mode's lifecycle would never take off). A shadow-mode
// resource has no TableName: its Delete, after a switch back to normal
// mode, must leave the new controllers' finalizers alone.
func (b *builder) shadowAccessEntry() {
	b.controllerAccess = awseks.NewCfnAccessEntry(b.scope, jsii.String("ControllerAccessEntry"), &awseks.CfnAccessEntryProps{
		ClusterName:      jsii.String(b.cfg.ClusterName),
		PrincipalArn:     b.ControllerRole.RoleArn(),
		Type:             jsii.String("STANDARD"),
		KubernetesGroups: jsii.Strings(access.ShadowGroup),
	})
	b.registrarAccessEntry()
	b.controllersWaitFor(b.registrarResource("ControllerAccess", "Custom::NodewrightAccess", map[string]interface{}{
		"Name": dnsName("nodewright-shadow-", *b.stack.StackName()),
		"Mode": settings.ModeShadow,
	}))
}
