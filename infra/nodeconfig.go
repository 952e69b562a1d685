package infra

import (
	"errors"
	"fmt"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// NodeClassInfo is what the stack needs to know about one EC2NodeClass.
type NodeClassInfo struct {
	Name            string
	Role            string
	InstanceProfile string
	// Source is "file:line" for error messages.
	Source string
}

// NodeConfig summarizes the user's validated NodePools and EC2NodeClasses.
type NodeConfig struct {
	NodePools   []string
	NodeClasses []NodeClassInfo
	// Warnings are non-fatal findings (deprecated v1beta1, ...), printed at synth.
	Warnings []string
}

// ConfigLoader validates the YAML files with the project's own loader
// (internal/apis) and summarizes them. Its error must name file, line and
// field: synth prints it as is.
type ConfigLoader func(files ...string) (*NodeConfig, error)

// checkNodeConfig verifies that the configuration can run under the IAM this
// stack creates: the functions may pass only the node role to EC2.
func checkNodeConfig(cfg Config, nc *NodeConfig) error {
	var errs []error
	if len(nc.NodePools) == 0 {
		errs = append(errs, fmt.Errorf("%s %s: no NodePool: nodewright would never launch a node", CtxConfigDir, cfg.ConfigDir))
	}
	if len(nc.NodeClasses) == 0 {
		errs = append(errs, fmt.Errorf("%s %s: no EC2NodeClass", CtxConfigDir, cfg.ConfigDir))
	}
	for _, c := range nc.NodeClasses {
		where := c.Source
		if where == "" {
			where = "EC2NodeClass " + c.Name
		}
		switch {
		case c.Role != "" && c.Role != cfg.NodeRoleName:
			errs = append(errs, fmt.Errorf("%s: spec.role: %q is not the node role this stack creates (%q); set spec.role to %q or deploy with -c %s=%s",
				where, c.Role, cfg.NodeRoleName, cfg.NodeRoleName, CtxNodeRoleName, c.Role))
		case c.InstanceProfile != "" && c.InstanceProfile != nwaws.InstanceProfileName(cfg.ClusterName, cfg.NodeRoleName):
			errs = append(errs, fmt.Errorf("%s: spec.instanceProfile: %q is not the instance profile this stack creates (%q); the functions may pass only the node role: set spec.role to %q instead",
				where, c.InstanceProfile, nwaws.InstanceProfileName(cfg.ClusterName, cfg.NodeRoleName), cfg.NodeRoleName))
		}
	}
	return errors.Join(errs...)
}
