package localcloud

import (
	"context"
	"fmt"
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

func planeAccessOptions(po *kubeplane.Options) {
	po.Users = append(po.Users, kubeplane.User{Name: controllerUser, Groups: []string{access.ControllerGroup}})
	po.AuditGroups = append(po.AuditGroups, access.ControllerGroup)
}

// applyAccess installs the controllers' RBAC the way the registrar does in
// EKS and prepares ControllerREST.
func (c *Cloud) applyAccess(ctx context.Context) error {
	if err := kube.ApplyControllerAccess(ctx, c.Plane.Client(), access.ControllerRoleName); err != nil {
		return fmt.Errorf("local cloud: controller RBAC: %w", err)
	}
	cfg, err := c.Plane.UserRESTConfig(controllerUser)
	if err != nil {
		return fmt.Errorf("local cloud: %w", err)
	}
	c.ControllerREST = cfg
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
// uses.
func (c *Cloud) Forbidden() ([]string, error) {
	if c.Plane == nil {
		return nil, nil
	}
	return c.Plane.Forbidden()
}
