package ec2sim

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
)

// AccountState is what a launch reads from the account beyond EC2 itself
// (the simulator's IAM and Service Quotas). A nil func means "exists" and
// "no limit".
type AccountState struct {
	// ServiceLinkedRole reports whether a service-linked role exists, by
	// role name.
	ServiceLinkedRole func(roleName string) bool
	// EC2Quota is the applied value of an EC2 Service Quotas code.
	EC2Quota func(code string) (float64, bool)
	// VolumeKeyUsable reports whether EBS may use a customer managed KMS
	// key (ID, ARN or alias) for the caller of the request in ctx (rule
	// kms-grant); nil when every key is usable.
	VolumeKeyUsable func(ctx context.Context, keyRef string) error
}

// spotRole is the role EC2 needs for spot requests (EC2 user guide,
// "Service-linked role for Spot Instance requests").
const spotRole = "AWSServiceRoleForEC2Spot"

// vcpuGroup is one quota group: EC2 counts On-Demand and Spot limits in
// vCPUs of the running (and, for spot, open) instances of a family group
// (EC2 user guide, "Amazon EC2 service quotas"; codes as in the Service
// Quotas console). The simulator keeps its own table: the product (doctor)
// must not import the simulator, nor the simulator the product.
type vcpuGroup struct{ onDemand, spot string }

// quotaGroup is the group of an instance type by its family letters.
func quotaGroup(itype string) vcpuGroup {
	name := strings.ToLower(itype)
	for _, p := range []struct {
		prefix string
		g      vcpuGroup
	}{{"inf", vcpuGroup{"L-1945791B", "L-B5D1601B"}}, {"trn", vcpuGroup{"L-2C3B7624", "L-6B0D517C"}},
		{"dl", vcpuGroup{"L-6E869C2A", "L-85EED4F7"}}, {"vt", vcpuGroup{"L-DB2E81BA", "L-3819A6DF"}},
		{"hpc", vcpuGroup{"L-F7808C92", ""}}, {"g", vcpuGroup{"L-DB2E81BA", "L-3819A6DF"}},
		{"p", vcpuGroup{"L-417A185B", "L-7212CCBC"}}, {"x", vcpuGroup{"L-7295265B", "L-E3A00192"}},
		{"f", vcpuGroup{"L-74FC7D96", "L-88CF9481"}}} {
		if strings.HasPrefix(name, p.prefix) {
			return p.g
		}
	}
	return vcpuGroup{"L-1216C47A", "L-34B43A08"} // standard: A, C, D, H, I, M, R, T, Z
}

// vcpusOf is a type's default vCPU count in the region's catalog.
func (c *Cloud) vcpusOf(itype string) int32 {
	info, ok := c.cfg.Catalog.Types[itype]
	if !ok || info.VCpuInfo == nil {
		return 0
	}
	return aws.ToInt32(info.VCpuInfo.DefaultVCpus)
}

// vcpusInUse counts the vCPUs of pending and running instances of a
// lifecycle in one quota group. Caller holds mu.
func (c *Cloud) vcpusInUse(code string, life types.InstanceLifecycle) float64 {
	var n float64
	for _, in := range c.instances {
		st := in.State.Name
		if st != types.InstanceStateNamePending && st != types.InstanceStateNameRunning {
			continue
		}
		// DescribeInstances leaves InstanceLifecycle empty for On-Demand.
		if (in.InstanceLifecycle == types.InstanceLifecycleTypeSpot) != (life == types.InstanceLifecycleSpot) {
			continue
		}
		g := quotaGroup(string(in.InstanceType))
		if g.onDemand == code || g.spot == code {
			n += float64(c.vcpusOf(string(in.InstanceType)))
		}
	}
	return n
}

// quotaExceeded is the per-override error of a launch one more instance
// of cd would take past its vCPU quota: VcpuLimitExceeded for On-Demand,
// MaxSpotInstanceCountExceeded for spot (EC2 API reference, "Error codes
// for the Amazon EC2 API"; aws/karpenter-provider-aws #5789 shows the spot
// one on a vCPU-limited account). Reserved launches count as On-Demand.
func (c *Cloud) quotaExceeded(cd *candidate, life types.InstanceLifecycle) (string, string) {
	if c.cfg.AccountState.EC2Quota == nil {
		return "", ""
	}
	g := quotaGroup(cd.itype)
	code, rule := g.onDemand, fidelity.VcpuLimit
	if life == types.InstanceLifecycleSpot {
		code, rule = g.spot, fidelity.MaxSpotInstanceCount
	}
	if code == "" || !c.cfg.Rules.On(rule) {
		return "", ""
	}
	limit, ok := c.cfg.AccountState.EC2Quota(code)
	if !ok || c.vcpusInUse(code, life)+float64(c.vcpusOf(cd.itype)) <= limit {
		return "", ""
	}
	if life == types.InstanceLifecycleSpot {
		return "MaxSpotInstanceCountExceeded", "Max spot instance count exceeded"
	}
	return "VcpuLimitExceeded", fmt.Sprintf("You have requested more vCPU capacity than your current vCPU limit of %.0f allows for the instance bucket that the specified instance type belongs to. Please visit http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit.", limit)
}

// spotRoleMissing is the per-override error of a spot launch in an
// account without the spot service-linked role. EC2 would create the role
// for a caller allowed iam:CreateServiceLinkedRole; nodewright's roles are
// not (least privilege), so the simulator never creates it on a launch.
// The message is Karpenter's TROUBLESHOOTING.md's.
func (c *Cloud) spotRoleMissing(life types.InstanceLifecycle) (string, string) {
	has := c.cfg.AccountState.ServiceLinkedRole
	if life != types.InstanceLifecycleSpot || has == nil || has(spotRole) || !c.cfg.Rules.On(fidelity.SpotServiceLinkedRole) {
		return "", ""
	}
	return "AuthFailure.ServiceLinkedRoleCreationNotPermitted", "The provided credentials do not have permission to create the service-linked role for EC2 Spot Instances."
}
