package localcloud

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/nodewright/nodewright/internal/access"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// The controllers' identity in the local cloud. Their AWS credentials map,
// through the simulator's token webhook, to access.ControllerGroup, as the
// stack's access entry does in EKS; ControllerREST is the same user with a
// static token. Either way the API server gives them exactly
// access.ControllerClusterRole, never the admin's rights.
const (
	ControllerAccessKeyID     = "AKIALOCALCLOUDCTRL01"
	ControllerSecretAccessKey = "localcloud/controller/key/not/a/real/one"
	controllerRole            = "nodewright-controller"
	controllerUser            = "nodewright-controller"
)

// identities maps the controller role to its group and every other caller
// of the account to cluster-admin (tests, the demo's stand-in registrar),
// first match wins.
func identities(account string) []awssim.Identity {
	return []awssim.Identity{
		{ARN: fmt.Sprintf("arn:aws:iam::%s:role/%s", account, controllerRole), Username: controllerUser + ":{{SessionName}}", Groups: []string{access.ControllerGroup}},
		{ARN: fmt.Sprintf("arn:aws:iam::%s:*", account), Groups: []string{"system:masters"}},
	}
}

func controllerCallerARN(account string) string {
	return fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/nodewright", account, controllerRole)
}

// A shadow-mode stack's functions (-c mode=shadow) get, through their EKS
// access entry, access.ShadowGroup, which the registrar binds to
// access.ShadowClusterRole: the controllers' reads, no write, no Secret.
// The local cloud gives shadowUser that group and applies the same objects
// the same way; ShadowREST authenticates as it.
const (
	shadowUser = "nodewright-shadow"
	shadowRole = access.ShadowRoleName
)

func planeAccessOptions(po *kubeplane.Options) {
	po.Users = append(po.Users, kubeplane.User{Name: controllerUser, Groups: []string{access.ControllerGroup}},
		kubeplane.User{Name: shadowUser, Groups: []string{access.ShadowGroup}})
	po.AuditGroups = append(po.AuditGroups, access.ControllerGroup, access.ShadowGroup)
}

// applyAccess installs the controllers' RBAC and a shadow-mode stack's
// the way the registrar does in EKS, and prepares ControllerREST and
// ShadowREST.
func (c *Cloud) applyAccess(ctx context.Context) error {
	cs := c.Plane.Client()
	if err := kube.ApplyControllerAccess(ctx, cs, access.ControllerRoleName); err != nil {
		return fmt.Errorf("local cloud: controller RBAC: %w", err)
	}
	if err := kube.ApplyShadowAccess(ctx, cs, shadowRole); err != nil {
		return fmt.Errorf("local cloud: shadow-mode RBAC: %w", err)
	}
	var err error
	if c.ControllerREST, err = c.Plane.UserRESTConfig(controllerUser); err != nil {
		return fmt.Errorf("local cloud: %w", err)
	}
	if c.ShadowREST, err = c.Plane.UserRESTConfig(shadowUser); err != nil {
		return fmt.Errorf("local cloud: %w", err)
	}
	return nil
}

// ControllerEnv is Env with the controllers' credentials: a process started
// with it reaches the cluster (through EKS and the token webhook) with the
// controllers' rights only.
func (c *Cloud) ControllerEnv() []string {
	env := c.Env()
	for i, kv := range env {
		switch {
		case strings.HasPrefix(kv, "AWS_ACCESS_KEY_ID="):
			env[i] = "AWS_ACCESS_KEY_ID=" + ControllerAccessKeyID
		case strings.HasPrefix(kv, "AWS_SECRET_ACCESS_KEY="):
			env[i] = "AWS_SECRET_ACCESS_KEY=" + ControllerSecretAccessKey
		}
	}
	return env
}

// Forbidden lists the controllers' requests the API server refused (403)
// so far: any entry means ControllerClusterRole lacks a right nodewright
// uses. Writes refused to the shadow-mode identity are left out: RBAC is
// there to refuse them (the shadow tests check that shadow mode attempts
// none); a read refused to it is listed.
func (c *Cloud) Forbidden() ([]string, error) {
	if c.Plane == nil {
		return nil, nil
	}
	denied, err := c.Plane.Forbidden()
	return slices.DeleteFunc(denied, shadowWrite), err
}

// shadowWrite tells whether a Forbidden line ("user verb resource
// namespace/name") is a write by the shadow-mode identity.
func shadowWrite(line string) bool {
	user, rest, _ := strings.Cut(line, " ")
	verb, _, _ := strings.Cut(rest, " ")
	return user == shadowUser && !slices.Contains([]string{"get", "list", "watch"}, verb)
}
