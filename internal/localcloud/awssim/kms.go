package awssim

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// The simulator's KMS is a minimal key model for one question: may the
// caller of a launch use the customer managed key an encrypted EBS volume
// names? There is no KMS API (nodewright calls none); keys are registered
// by tests with AddKMSKey.
//
// What EBS needs, and from whom (rule kms-grant):
//   - Amazon EBS user guide, "Permissions for IAM users" (EBS encryption):
//     the principal launching with a customer managed key needs
//     kms:CreateGrant, kms:Decrypt, kms:DescribeKey,
//     kms:GenerateDataKeyWithoutPlaintext and kms:ReEncrypt* on the key.
//     The simulator requires the four a launch from an AMI snapshot uses
//     (ReEncrypt* re-encrypts an existing encrypted snapshot under another
//     key; the stack grants it as the guide lists it).
//   - EC2 makes those calls on the caller's behalf, so they arrive with
//     kms:ViaService=ec2.<region>.amazonaws.com, kms:CallerAccount, and for
//     CreateGrant kms:GrantIsForAWSResource=true (AWS KMS developer guide,
//     condition keys).
//   - The key policy decides first: the default key policy's "Enable IAM
//     User Permissions" statement lets identity policies decide; without it
//     only principals the key policy names may use the key (AWS KMS
//     developer guide, "Default key policy").
//   - A caller that may not use the key, or a key that is disabled or does
//     not exist, does not fail the launch call: EC2 validates the key
//     asynchronously (ModifyEbsDefaultKmsKeyId API reference) and the
//     instance goes pending -> terminated with state reason
//     Client.InvalidKMSKey.InvalidState (Karpenter troubleshooting, "Node
//     terminates before ready on failed encrypted EBS volume").

// KMSKey is one key.
type KMSKey struct {
	// ID is the key ID (a UUID); its ARN is arn:aws:kms:<region>:<account>:key/<ID>.
	ID string
	// Aliases are its alias names ("alias/ebs-nodes").
	Aliases []string
	// Disabled keys cannot be used by anyone.
	Disabled bool
	// KeyPolicyWithoutIAM: the key policy lacks the default "Enable IAM
	// User Permissions" statement, so identity policies grant nothing;
	// only Principals may use the key.
	KeyPolicyWithoutIAM bool
	// Principals are role ARNs the key policy itself allows every KMS
	// action to (a "Principal": {"AWS": <role>} statement).
	Principals []string
}

// ebsKeyActions are the KMS calls EC2 makes with the caller's rights to
// create and attach a volume encrypted under a customer managed key.
var ebsKeyActions = []string{"kms:CreateGrant", "kms:GenerateDataKeyWithoutPlaintext", "kms:Decrypt", "kms:DescribeKey"}

// errKeyUnusable is why a volume's key cannot be used (the instance then
// terminates; the message goes to the server log).
var errKeyUnusable = errors.New("the KMS key provided is in an incorrect state")

// AddKMSKey registers a key (replacing one with the same ID).
func (s *Server) AddKMSKey(k KMSKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kmsKeys == nil {
		s.kmsKeys = map[string]KMSKey{}
	}
	s.kmsKeys[k.ID] = k
}

// KMSKeyARN is a registered key's ARN.
func (s *Server) KMSKeyARN(id string) string {
	return fmt.Sprintf("arn:aws:kms:%s:%s:key/%s", s.opts.Region, s.opts.AccountID, id)
}

// resolveKMSKey finds a key by ID, key ARN, alias name or alias ARN, as
// EBS's KmsKeyId takes them.
func (s *Server) resolveKMSKey(ref string) (KMSKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := ref
	if strings.HasPrefix(ref, "arn:") {
		if i := strings.Index(ref, ":key/"); i >= 0 {
			name = ref[i+len(":key/"):]
		} else if i := strings.Index(ref, ":alias/"); i >= 0 {
			name = ref[i+1:]
		}
	}
	if k, ok := s.kmsKeys[name]; ok {
		return k, true
	}
	for _, k := range s.kmsKeys {
		for _, a := range k.Aliases {
			if a == name {
				return k, true
			}
		}
	}
	return KMSKey{}, false
}

// awsManagedEBSKey reports EBS's AWS managed key, which every principal of
// the account that may use EBS may use (no grant needed).
func awsManagedEBSKey(ref string) bool {
	return ref == "alias/aws/ebs" || strings.HasSuffix(ref, ":alias/aws/ebs")
}

// volumeKeyUsable answers ec2sim's question for a launch request's caller:
// nil when EBS may use the key on their behalf.
func (s *Server) volumeKeyUsable(ctx context.Context, ref string) error {
	if awsManagedEBSKey(ref) {
		return nil
	}
	k, ok := s.resolveKMSKey(ref)
	if !ok {
		return fmt.Errorf("key %s: not found: %w", ref, errKeyUnusable)
	}
	if k.Disabled {
		return fmt.Errorf("key %s: disabled: %w", ref, errKeyUnusable)
	}
	akid := callerOf(ctx)
	s.authz.mu.Lock()
	role := s.authz.roles[akid]
	s.authz.mu.Unlock()
	if role == nil {
		// The account's administrator: allowed whenever IAM decides.
		if k.KeyPolicyWithoutIAM {
			return fmt.Errorf("key %s: the key policy names no administrator: %w", ref, errKeyUnusable)
		}
		return nil
	}
	for _, action := range ebsKeyActions {
		if err := s.authorizeKeyUse(akid, role, k, action); err != nil {
			return err
		}
	}
	return nil
}

// authorizeKeyUse evaluates one KMS action of EC2 on the caller's behalf:
// the key policy, then (when it delegates to IAM) the caller's policies.
func (s *Server) authorizeKeyUse(akid string, role *Role, k KMSKey, action string) error {
	for _, p := range k.Principals {
		if p == role.ARN {
			return nil
		}
	}
	req := s.kmsRequest(role.ARN, k, action)
	principal, _ := s.principal(akid)
	req.Principal = principal.arn
	d := iam.Decision{Effect: iam.ImplicitDeny}
	if !k.KeyPolicyWithoutIAM {
		d = iam.Evaluate(role.Policies, req)
	}
	if d.Effect == iam.Allowed {
		s.recordUse(role.ARN, action, d)
		return nil
	}
	m := iam.NewMessage(req, d)
	s.authz.mu.Lock()
	s.authz.denials = append(s.authz.denials, Denial{Principal: principal.arn, Action: action, Resource: req.Resource, Message: m})
	s.authz.mu.Unlock()
	s.logger.Warn("kms denied", "principal", principal.arn, "action", action, "resource", req.Resource, "effect", d.Effect.String())
	return fmt.Errorf("%s on %s denied to %s: %w", action, req.Resource, role.ARN, errKeyUnusable)
}

// kmsRequest is the request context of EC2's call to KMS on behalf of the
// caller (AWS KMS developer guide, "AWS KMS condition keys").
func (s *Server) kmsRequest(roleARN string, k KMSKey, action string) iam.Request {
	ctx := iam.Context{}
	ctx.Set("aws:RequestedRegion", s.opts.Region)
	ctx.Set("aws:PrincipalArn", roleARN)
	ctx.Set("aws:PrincipalAccount", s.opts.AccountID)
	ctx.Set("kms:ViaService", "ec2."+s.opts.Region+".amazonaws.com")
	ctx.Set("kms:CallerAccount", s.opts.AccountID)
	if len(k.Aliases) > 0 {
		ctx.Set("kms:ResourceAliases", k.Aliases...)
	}
	if action == "kms:CreateGrant" {
		ctx.Set("kms:GrantIsForAWSResource", "true")
	}
	return iam.Request{Principal: roleARN, Action: action, Resource: s.KMSKeyARN(k.ID), Context: ctx}
}

// callerKey carries the access key ID of an EC2 request's signer into
// ec2sim, for the checks EC2 makes later with the caller's rights.
type callerKey struct{}

func withCaller(ctx context.Context, akid string) context.Context {
	return context.WithValue(ctx, callerKey{}, akid)
}

func callerOf(ctx context.Context) string {
	akid, _ := ctx.Value(callerKey{}).(string)
	return akid
}
