package infra

import (
	"github.com/aws/aws-cdk-go/awscdk/v2/awseks"
	"github.com/aws/aws-cdk-go/awscdk/v2/awsiam"
	"github.com/aws/jsii-runtime-go"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// NodeManagedPolicies are the managed policies every EKS node needs (the
// same four Karpenter's getting started guide attaches).
var NodeManagedPolicies = []string{
	"AmazonEKSWorkerNodePolicy",
	"AmazonEKS_CNI_Policy",
	"AmazonEC2ContainerRegistryPullOnly",
	"AmazonSSMManagedInstanceCore",
}

// nodeRole creates the stack's own node role and its instance profile, and
// an instance profile for every other role an EC2NodeClass names in
// spec.role (see noderoles.go for why the stack, not the functions, does).
func (b *builder) nodeRole() {
	var mps []awsiam.IManagedPolicy
	for _, p := range NodeManagedPolicies {
		mps = append(mps, awsiam.ManagedPolicy_FromAwsManagedPolicyName(jsii.String(p)))
	}
	// The stack's role is created even when no class uses it: its name and
	// ARN are the functions' settings and the stack's outputs. It is passed
	// to EC2 only when a class uses it.
	b.NodeRole = awsiam.NewRole(b.scope, jsii.String("NodeRole"), &awsiam.RoleProps{
		RoleName:        jsii.String(b.cfg.NodeRoleName),
		AssumedBy:       awsiam.NewServicePrincipal(jsii.String("ec2.amazonaws.com"), nil),
		ManagedPolicies: &mps,
		Description:     jsii.String("Nodes launched by nodewright for EKS cluster " + b.cfg.ClusterName),
	})
	b.instanceProfile = awsiam.NewInstanceProfile(b.scope, jsii.String("NodeInstanceProfile"), &awsiam.InstanceProfileProps{
		InstanceProfileName: jsii.String(nwaws.InstanceProfileName(b.cfg.ClusterName, b.cfg.NodeRoleName)),
		Role:                b.NodeRole,
	})
	for _, r := range b.NodeRoles {
		if !r.Profile {
			continue
		}
		// Roles holds role names; a path is not part of them.
		awsiam.NewCfnInstanceProfile(b.scope, jsii.String("InstanceProfileFor-"+r.Name), &awsiam.CfnInstanceProfileProps{
			InstanceProfileName: jsii.String(nwaws.InstanceProfileName(b.cfg.ClusterName, r.Name)),
			Roles:               &[]interface{}{r.Name},
		})
	}
}

// nodeRoleArn is the ARN of a node role: the stack's, the one the user
// gave, or a role of that name without a path in the stack's account.
func (b *builder) nodeRoleArn(r *NodeRole) *string {
	switch {
	case r.Own:
		return b.NodeRole.RoleArn()
	case r.ARN != "":
		return jsii.String(r.ARN)
	default:
		return b.sub("arn:${AWS::Partition}:iam::${AWS::AccountId}:role/" + r.Name)
	}
}

// passableNodeRoles are the roles the controllers may pass to EC2: exactly
// those the EC2NodeClasses launch with.
func (b *builder) passableNodeRoles() *[]*string {
	var arns []*string
	for _, r := range b.NodeRoles {
		arns = append(arns, b.nodeRoleArn(r))
	}
	return &arns
}

// nodeAccessEntries: nodes join through an EC2_LINUX or EC2_WINDOWS entry
// of their role (system:nodes via the node authorizer), never through
// aws-auth. The stack's own role always has one, as before classes could
// name other roles; a role the user says has one already gets none (a
// second entry for a principal fails the deployment).
func (b *builder) nodeAccessEntries() {
	own := &NodeRole{Name: b.cfg.NodeRoleName, Own: true}
	for _, r := range b.NodeRoles {
		if r.Own {
			own = r
		}
	}
	for _, r := range b.NodeRoles {
		if r.Own || r.ExistingAccessEntry {
			continue
		}
		awseks.NewCfnAccessEntry(b.scope, jsii.String("NodeAccessEntryFor-"+r.Name), &awseks.CfnAccessEntryProps{
			ClusterName:  jsii.String(b.cfg.ClusterName),
			PrincipalArn: b.nodeRoleArn(r),
			Type:         jsii.String(r.AccessEntryType()),
		})
	}
	if own.ExistingAccessEntry {
		return
	}
	awseks.NewCfnAccessEntry(b.scope, jsii.String("NodeAccessEntry"), &awseks.CfnAccessEntryProps{
		ClusterName:  jsii.String(b.cfg.ClusterName),
		PrincipalArn: b.NodeRole.RoleArn(),
		Type:         jsii.String(own.AccessEntryType()),
	})
}
