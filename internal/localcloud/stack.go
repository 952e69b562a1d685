package localcloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/nodewright/nodewright/internal/access"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// StackResources are the resources of one nodewright deployment in the
// local cloud, as a test or the demo created them: what the stack's
// template names by construct ID.
type StackResources struct {
	Table string // the NodeClaim table (construct "Table"); required
	// Queue names or URLs (constructs ProvisionQueue, WorkQueue,
	// InterruptionQueue, DisruptionQueue); empty when the deployment has
	// none.
	ProvisionQueue, WorkQueue, InterruptionQueue, DisruptionQueue string
	// WebhookSecret is the webhook secret's name or ARN.
	WebhookSecret string
	// NodeRole is the role the EC2NodeClasses name (default
	// "KarpenterNodeRole-<cluster>", cloudtest.NodeClassYAML's); its
	// instance profile is the stack's (nwaws.InstanceProfileName).
	NodeRole string
	// ClusterName defaults to the cloud's.
	ClusterName string
	// Shadow deploys the stack as -c mode=shadow synthesizes it: roles
	// with read rights only.
	Shadow bool
}

// The stack's function roles, by construct ID in the template, and the
// names they get in the local cloud. The controller's name is the one the
// simulator's token webhook maps to access.ControllerGroup.
var stackRoles = map[string]string{
	"ControllerRole": controllerRole,
	"WebhookRole":    "nodewright-webhook",
	"RegistrarRole":  "nodewright-registrar",
}

// Stack is one deployment's function roles: the credentials each function
// signs its AWS calls with. Under IAM enforcement every call they sign is
// evaluated under the role's policies from the synthesized template.
type Stack struct {
	Controller, Webhook, Registrar sdkaws.CredentialsProvider
	keys                           map[string]sdkaws.Credentials
}

var stackSeq atomic.Int64

// Deploy registers a deployment's roles with the simulator: each role's
// policies are the synthesized template's, resolved against r, and each
// role gets its own access key. Without IAM enforcement (IAMOff), every
// role is the account administrator's credentials.
func (c *Cloud) Deploy(r StackResources) (*Stack, error) {
	if r.Table == "" {
		return nil, fmt.Errorf("deploy: a stack needs its table")
	}
	if r.ClusterName == "" {
		r.ClusterName = c.ClusterName
	}
	if r.NodeRole == "" {
		r.NodeRole = "KarpenterNodeRole-" + r.ClusterName
	}
	st := &Stack{keys: map[string]sdkaws.Credentials{}}
	if c.AWS == nil || c.iamTemplate == nil {
		admin := sdkaws.Credentials{AccessKeyID: awssim.DefaultAccessKeyID, SecretAccessKey: awssim.DefaultSecretAccessKey}
		for construct := range stackRoles {
			st.keys[construct] = admin
		}
		return st.finish(), nil
	}
	tpl := c.iamTemplate
	if r.Shadow {
		var err error
		if tpl, err = c.shadowTemplate(); err != nil {
			return nil, fmt.Errorf("deploy: %w", err)
		}
	}
	b := c.binding(r)
	seq := stackSeq.Add(1)
	roleARNs := map[string]string{}
	for construct, name := range stackRoles {
		policies, err := tpl.RolePolicies(construct, b)
		if err != nil {
			return nil, fmt.Errorf("deploy: %w", err)
		}
		policies = dropStatements(policies, os.Getenv(EnvIAMDrop))
		if r.Shadow {
			policies = shadowStatements(policies)
		}
		roleARN := fmt.Sprintf("arn:aws:iam::%s:role/%s", c.account(), name)
		sum := sha256.Sum256(fmt.Appendf(nil, "%s/%s/%d", r.Table, construct, seq))
		key := sdkaws.Credentials{AccessKeyID: "ASIA" + strings.ToUpper(hex.EncodeToString(sum[:8])), SecretAccessKey: "localcloud/" + hex.EncodeToString(sum[8:24])}
		session := fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/%s", c.account(), name, strings.ToLower(construct))
		c.AWS.AddRole(key.AccessKeyID, key.SecretAccessKey, session, awssim.Role{ARN: roleARN, Policies: policies})
		st.keys[construct] = key
		roleARNs[construct] = roleARN
	}
	// The instance profiles the stack creates: its own node role's and one
	// per role an EC2NodeClass of the synthesized configuration names.
	profiles, err := tpl.InstanceProfiles(b)
	if err != nil {
		return nil, fmt.Errorf("deploy: %w", err)
	}
	for p, role := range profiles {
		c.AWS.AddInstanceProfile(p, role)
	}
	profile := nwaws.InstanceProfileName(r.ClusterName, r.NodeRole)
	nodeRoleARN := fmt.Sprintf("arn:aws:iam::%s:role/%s", c.account(), r.NodeRole)
	c.AWS.AddInstanceProfile(fmt.Sprintf("arn:aws:iam::%s:instance-profile/%s", c.account(), profile), nodeRoleARN)
	profiles[profile] = nodeRoleARN
	c.putStack(r, roleARNs, profiles)
	return st.finish(), nil
}

// putStack records what CloudFormation would hold after the deployment:
// the stack and its outputs (infra's outputs) and the access entries it
// creates (the controller's and the registrar's, STANDARD; each node
// role's, EC2_LINUX), as `nodewright doctor` reads them.
func (c *Cloud) putStack(r StackResources, roleARNs, profiles map[string]string) {
	outputs := map[string]string{
		"TableName": r.Table, "ProvisionQueueUrl": r.ProvisionQueue, "WorkQueueUrl": r.WorkQueue,
		"InterruptionQueueUrl": r.InterruptionQueue, "DisruptionQueueUrl": r.DisruptionQueue,
		"NodeRoleName": r.NodeRole, "NodeRoleArn": fmt.Sprintf("arn:aws:iam::%s:role/%s", c.account(), r.NodeRole),
		"NodeInstanceProfileName": nwaws.InstanceProfileName(r.ClusterName, r.NodeRole),
		"ControllerRoleArn":       roleARNs["ControllerRole"], "WebhookRoleArn": roleARNs["WebhookRole"], "RegistrarRoleArn": roleARNs["RegistrarRole"],
	}
	c.AWS.PutStack("nodewright-"+r.ClusterName, outputs)
	groups := []string{access.ControllerGroup}
	if r.Shadow {
		groups = []string{access.ShadowGroup}
	}
	c.AWS.PutAccessEntry(awssim.AccessEntry{PrincipalARN: roleARNs["ControllerRole"], Type: "STANDARD", KubernetesGroups: groups})
	c.AWS.PutAccessEntry(awssim.AccessEntry{PrincipalARN: roleARNs["RegistrarRole"], Type: "STANDARD"})
	for _, role := range profiles {
		c.AWS.PutAccessEntry(awssim.AccessEntry{PrincipalARN: role, Type: "EC2_LINUX", KubernetesGroups: []string{"system:nodes"}})
	}
}

// ShadowStatementPrefix starts the IDs of a shadow-mode stack's
// statements: the coverage report is the normal stack's (a shadow stack's
// statements share its roles and numbering), so it leaves them out.
const ShadowStatementPrefix = "shadow/"

func shadowStatements(policies []*iam.Policy) []*iam.Policy {
	out := make([]*iam.Policy, len(policies))
	for i, p := range policies {
		cp := &iam.Policy{Name: p.Name, Statements: slices.Clone(p.Statements)}
		for j := range cp.Statements {
			cp.Statements[j].ID = ShadowStatementPrefix + cp.Statements[j].ID
		}
		out[i] = cp
	}
	return out
}

// shadowTemplate synthesizes the shadow-mode template once per cloud.
func (c *Cloud) shadowTemplate() (*iam.Template, error) {
	c.shadowOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
		defer cancel()
		c.shadowTpl, c.shadowErr = ShadowIAMTemplate(ctx)
	})
	return c.shadowTpl, c.shadowErr
}

func (s *Stack) finish() *Stack {
	p := func(k sdkaws.Credentials) sdkaws.CredentialsProvider {
		return credentials.NewStaticCredentialsProvider(k.AccessKeyID, k.SecretAccessKey, "")
	}
	s.Controller, s.Webhook, s.Registrar = p(s.keys["ControllerRole"]), p(s.keys["WebhookRole"]), p(s.keys["RegistrarRole"])
	return s
}

// binding resolves the template against a deployment's resources.
func (c *Cloud) binding(r StackResources) iam.Binding {
	phys := map[string]string{"Table": r.Table, "NodeRole": r.NodeRole,
		"NodeInstanceProfile": nwaws.InstanceProfileName(r.ClusterName, r.NodeRole)}
	for construct, name := range map[string]string{"ProvisionQueue": r.ProvisionQueue, "WorkQueue": r.WorkQueue, "InterruptionQueue": r.InterruptionQueue,
		"DisruptionQueue": r.DisruptionQueue, "WebhookSecret": r.WebhookSecret} {
		if name != "" {
			// A queue may be given by URL; the template names it by name.
			phys[construct] = name[strings.LastIndex(name, "/")+1:]
		}
	}
	for construct, name := range stackRoles {
		phys[construct] = name
	}
	return iam.Binding{Partition: "aws", Region: c.Region, Account: c.account(), StackName: "nodewright-" + r.ClusterName,
		Physical: phys, Replace: map[string]string{synthCluster: r.ClusterName, synthNodeRole: r.NodeRole}}
}

func (c *Cloud) account() string {
	if c.AWS != nil {
		return c.AWS.Options().AccountID
	}
	return awssim.DefaultAccountID
}

// EnvIAMDrop names a policy statement (its ID, e.g.
// "ControllerRoleDefaultPolicy#3") that Deploy leaves out of every role:
// the mutation test (`make iam-mutation`) runs the end-to-end tests once
// per statement without it, and each run must fail, or the statement is
// not needed.
const EnvIAMDrop = "NODEWRIGHT_IAM_DROP"

func dropStatements(policies []*iam.Policy, id string) []*iam.Policy {
	if id == "" {
		return policies
	}
	out := make([]*iam.Policy, 0, len(policies))
	for _, p := range policies {
		cp := &iam.Policy{Name: p.Name}
		for _, st := range p.Statements {
			if st.ID != id && !strings.HasPrefix(st.ID, id+" ") {
				cp.Statements = append(cp.Statements, st)
			}
		}
		out = append(out, cp)
	}
	return out
}
