package infra

import (
	"fmt"
	"strings"

	"github.com/nodewright/nodewright/internal/apis"
)

// LoadWithAPIs is the ConfigLoader of the real app: the project's own
// loader (strict YAML, defaults, v1beta1 conversion, validation) whose errors
// name file, line and field.
func LoadWithAPIs(files ...string) (*NodeConfig, error) {
	cfg, err := apis.Load(files...)
	if err != nil {
		return nil, err
	}
	nc := &NodeConfig{}
	for _, np := range cfg.NodePools {
		nc.NodePools = append(nc.NodePools, np.Name)
	}
	for _, c := range cfg.NodeClasses {
		// Windows families (windows2019, windows2022, ...) need an
		// EC2_WINDOWS access entry for their role.
		info := NodeClassInfo{Name: c.Name, Role: c.Spec.Role, Windows: strings.HasPrefix(strings.ToLower(c.AMIFamily()), "windows")}
		for _, t := range c.Spec.AMISelectorTerms {
			if t.SSMParameter != "" {
				info.SSMParameters = append(info.SSMParameters, t.SSMParameter)
			}
		}
		for _, m := range c.Spec.BlockDeviceMappings {
			if m != nil && m.EBS != nil && m.EBS.KMSKeyID != nil && *m.EBS.KMSKeyID != "" {
				info.KMSKeys = append(info.KMSKeys, *m.EBS.KMSKeyID)
			}
		}
		if c.Spec.InstanceProfile != nil {
			info.InstanceProfile = *c.Spec.InstanceProfile
		}
		if src, ok := cfg.Sources[apis.ObjectKey{Kind: apis.EC2NodeClassKind, Name: c.Name}]; ok && src.File != "" {
			info.Source = fmt.Sprintf("%s:%d: EC2NodeClass %s", src.File, src.Line, c.Name)
		}
		nc.NodeClasses = append(nc.NodeClasses, info)
	}
	for _, w := range cfg.Warnings {
		nc.Warnings = append(nc.Warnings, w.String())
	}
	return nc, nil
}
