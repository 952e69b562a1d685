package infra

import (
	"errors"
	"fmt"
)

// NodeClassInfo is what the stack needs to know about one EC2NodeClass.
type NodeClassInfo struct {
	Name            string
	Role            string
	InstanceProfile string
	// Windows: the class launches a Windows AMI family.
	Windows bool
	// SSMParameters are the amiSelectorTerms' ssmParameter values (names
	// or ARNs): the controller reads them with ssm:GetParameter.
	SSMParameters []string
	// KMSKeys are the kmsKeyID values of its block device mappings (key
	// ID, key ARN, alias or alias ARN): EBS uses them with the
	// controller's rights (kmsgrants.go).
	KMSKeys []string
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

// checkNodeConfig verifies that the configuration can run under the IAM
// this stack creates and returns the roles its nodes launch with.
func checkNodeConfig(cfg Config, nc *NodeConfig) ([]*NodeRole, error) {
	var errs []error
	if len(nc.NodePools) == 0 {
		errs = append(errs, fmt.Errorf("%s %s: no NodePool: nodewright would never launch a node", CtxConfigDir, cfg.ConfigDir))
	}
	if len(nc.NodeClasses) == 0 {
		errs = append(errs, fmt.Errorf("%s %s: no EC2NodeClass", CtxConfigDir, cfg.ConfigDir))
	}
	roles, err := nodeRolesOf(cfg, nc)
	return roles, errors.Join(append(errs, err)...)
}
