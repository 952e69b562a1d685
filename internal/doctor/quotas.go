package doctor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas"
	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/catalog"
)

// SpotServiceLinkedRole is the role EC2 needs to launch spot instances; it
// is created once per account (EC2 user guide, "Service-linked role for
// Spot Instance requests"), and the functions may not create it.
const SpotServiceLinkedRole = "AWSServiceRoleForEC2Spot"

// checkSpotRole: when a NodePool may launch spot, the account has the spot
// service-linked role (without it CreateFleet fails every spot override
// with AuthFailure.ServiceLinkedRoleCreationNotPermitted).
func (e *env) checkSpotRole(ctx context.Context) {
	spotPools := e.spotPools(ctx)
	if len(spotPools) == 0 {
		e.pass("spot-service-linked-role", "no NodePool launches spot: not needed")
		return
	}
	_, err := e.c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: sdkaws.String(SpotServiceLinkedRole)})
	var missing *iamtypes.NoSuchEntityException
	switch {
	case errors.As(err, &missing):
		e.fail("spot-service-linked-role", "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com (once per account)",
			"%s does not exist, and NodePool(s) %s may launch spot: every spot launch would fail", SpotServiceLinkedRole, strings.Join(spotPools, ", "))
	case err != nil:
		e.fail("spot-service-linked-role", "your credentials need iam:GetRole", "get role %s: %v", SpotServiceLinkedRole, err)
	default:
		e.pass("spot-service-linked-role", "%s exists (NodePools launching spot: %s)", SpotServiceLinkedRole, strings.Join(spotPools, ", "))
	}
}

func (e *env) spotPools(ctx context.Context) []string {
	cat, err := e.catalog(ctx)
	var out []string
	for _, np := range e.o.Config.NodePools {
		if err != nil {
			// Without the catalog, read the requirement alone.
			out = append(out, np.Name)
			continue
		}
		if allowsSpot(poolTypes(cat, np, e.o.Config.NodeClassFor(np))) {
			out = append(out, np.Name)
		}
	}
	return out
}

// ReservedConcurrency is the concurrency the stack's functions reserve
// (infra.Sizing's ReservedConcurrency; infra's tests keep the two equal).
var ReservedConcurrency = map[string]int{"webhook": 10, "interruption": 5, "disruption": 1}

// lambdaUnreservedFloor is what Lambda keeps unreserved: "You can reserve
// up to the Unreserved account concurrency value minus 100" (Lambda
// developer guide, "Configuring reserved concurrency"); accounts whose
// limit is under 100 can reserve nothing.
const lambdaUnreservedFloor = 100

// checkLambdaConcurrency: the account can reserve what the stack's
// functions reserve (before deploy: out of what is unreserved now; after:
// the limit holds them and Lambda's floor).
func (e *env) checkLambdaConcurrency(ctx context.Context) {
	need := 0
	for _, n := range ReservedConcurrency {
		need += n
	}
	out, err := e.c.Lambda.GetAccountSettings(ctx, &lambda.GetAccountSettingsInput{})
	if err != nil {
		e.fail("lambda-concurrency", "your credentials need lambda:GetAccountSettings", "get Lambda account settings: %v", err)
		return
	}
	limit, unreserved := int(sdkaws.ToInt32(&out.AccountLimit.ConcurrentExecutions)), int(sdkaws.ToInt32(out.AccountLimit.UnreservedConcurrentExecutions))
	fix := fmt.Sprintf("ask for more: aws service-quotas request-service-quota-increase --service-code lambda --quota-code L-B99A9384 --desired-value %d --region %s"+
		", or deploy the stack reserving less: cdk deploy ... -c reservedConcurrency=webhook=0,interruption=0,disruption=0 (without the webhook's cap and interruption's floor)",
		max(1000, need+lambdaUnreservedFloor), e.o.Region)
	floor := min(limit, lambdaUnreservedFloor)
	switch {
	case limit-need < floor:
		e.fail("lambda-concurrency", fix, "the account's limit is %d concurrent executions: the stack reserves %d and Lambda keeps %d unreserved", limit, need, lambdaUnreservedFloor)
	case !e.deployed() && unreserved-need < floor:
		e.fail("lambda-concurrency", fix+", or lower other functions' reserved concurrency",
			"%d of %d executions are unreserved: reserving the stack's %d would leave fewer than the %d Lambda keeps", unreserved, limit, need, floor)
	default:
		e.pass("lambda-concurrency", "limit %d, %d unreserved: the stack reserves %d (webhook 10, interruption 5, disruption 1)", limit, unreserved, need)
	}
}

// vcpuQuota names the Service Quotas codes of one instance family group:
// EC2 counts On-Demand and Spot limits in vCPUs per group (EC2 user guide,
// "Amazon EC2 service quotas", and the Service Quotas console's codes).
type vcpuQuota struct {
	group          string
	onDemand, spot string // "" when the group has no such quota
}

var vcpuQuotas = []vcpuQuota{
	{"Standard (A, C, D, H, I, M, R, T, Z)", "L-1216C47A", "L-34B43A08"},
	{"G and VT", "L-DB2E81BA", "L-3819A6DF"},
	{"P", "L-417A185B", "L-7212CCBC"},
	{"X", "L-7295265B", "L-E3A00192"},
	{"F", "L-74FC7D96", "L-88CF9481"},
	{"Inf", "L-1945791B", "L-B5D1601B"},
	{"DL", "L-6E869C2A", "L-85EED4F7"},
	{"Trn", "L-2C3B7624", "L-6B0D517C"},
	{"HPC", "L-F7808C92", ""},
}

// quotaOf is the vCPU quota group of an instance type, by its name's
// family letters.
func quotaOf(it *catalog.InstanceType) (vcpuQuota, bool) {
	name := strings.ToLower(it.Name)
	for prefix, i := range map[string]int{"inf": 5, "trn": 7, "dl": 6, "vt": 1, "hpc": 8} {
		if strings.HasPrefix(name, prefix) {
			return vcpuQuotas[i], true
		}
	}
	switch name[0] {
	case 'a', 'c', 'd', 'h', 'i', 'm', 'r', 't', 'z':
		return vcpuQuotas[0], true
	case 'g':
		return vcpuQuotas[1], true
	case 'p':
		return vcpuQuotas[2], true
	case 'x':
		return vcpuQuotas[3], true
	case 'f':
		return vcpuQuotas[4], true
	}
	return vcpuQuota{}, false
}

// quotaNeed is what the NodePools ask of one quota: the smallest type that
// could launch under it, and the largest NodePool cpu limit (0: none).
type quotaNeed struct {
	group, capacityType string
	smallest            *catalog.InstanceType
	pools               map[string]bool
	maxLimit            int64
}

// checkVCPUQuotas: for every quota group and capacity type the NodePools'
// types fall in, the quota fits at least the smallest of them (else no
// launch can succeed: VcpuLimitExceeded / MaxSpotInstanceCountExceeded),
// and warns when a NodePool's cpu limit is above it.
func (e *env) checkVCPUQuotas(ctx context.Context) {
	cat, err := e.catalog(ctx)
	if err != nil {
		e.fail("ec2-vcpu-quotas", "your credentials need ec2:DescribeInstanceTypes and ec2:DescribeInstanceTypeOfferings", "read the region's instance types: %v", err)
		return
	}
	needs := e.quotaNeeds(cat)
	if len(needs) == 0 {
		e.warn("ec2-vcpu-quotas", "check the NodePools' requirements against the instance types sold in "+e.o.Region, "no NodePool allows an instance type sold in %s", e.o.Region)
		return
	}
	for _, code := range slices.Sorted(maps.Keys(needs)) {
		e.checkQuota(ctx, code, needs[code])
	}
}

func (e *env) quotaNeeds(cat *catalog.Catalog) map[string]*quotaNeed {
	needs := map[string]*quotaNeed{}
	for _, np := range e.o.Config.NodePools {
		limit := int64(0)
		if q, ok := np.Spec.Limits[corev1.ResourceCPU]; ok {
			limit = q.Value()
		}
		for _, pt := range poolTypes(cat, np, e.o.Config.NodeClassFor(np)) {
			q, ok := quotaOf(pt.it)
			if !ok {
				continue
			}
			for ct := range pt.capacityTypes {
				code := map[string]string{catalog.CapacityTypeOnDemand: q.onDemand, catalog.CapacityTypeSpot: q.spot}[ct]
				if code == "" {
					continue
				}
				n := needs[code]
				if n == nil {
					n = &quotaNeed{group: q.group, capacityType: ct, pools: map[string]bool{}}
					needs[code] = n
				}
				if n.smallest == nil || pt.it.VCPU < n.smallest.VCPU {
					n.smallest = pt.it
				}
				n.pools[np.Name] = true
				n.maxLimit = max(n.maxLimit, limit)
			}
		}
	}
	return needs
}

func (e *env) checkQuota(ctx context.Context, code string, n *quotaNeed) {
	name := "ec2-vcpu-quota/" + n.capacityType + "/" + code
	out, err := e.c.Quotas.GetServiceQuota(ctx, &servicequotas.GetServiceQuotaInput{ServiceCode: sdkaws.String("ec2"), QuotaCode: sdkaws.String(code)})
	if err != nil {
		e.warn(name, "your credentials need servicequotas:GetServiceQuota; check the quota in the Service Quotas console", "read %s %s vCPU quota %s: %v", n.group, n.capacityType, code, err)
		return
	}
	value := int64(sdkaws.ToFloat64(out.Quota.Value))
	pools := strings.Join(slices.Sorted(maps.Keys(n.pools)), ", ")
	fix := fmt.Sprintf("aws service-quotas request-service-quota-increase --service-code ec2 --quota-code %s --desired-value <vCPUs> --region %s", code, e.o.Region)
	switch {
	case value < n.smallest.VCPU:
		e.fail(name, fix, "%s %s instances: quota %d vCPUs, below the %d of %s, the smallest type NodePool(s) %s allow: no launch can succeed",
			n.group, n.capacityType, value, n.smallest.VCPU, n.smallest.Name, pools)
	case n.maxLimit > value:
		e.warn(name, fix, "%s %s instances: quota %d vCPUs, below the cpu limit %d of NodePool(s) %s", n.group, n.capacityType, value, n.maxLimit, pools)
	default:
		e.pass(name, "%s %s instances: quota %d vCPUs (NodePool(s) %s)", n.group, n.capacityType, value, pools)
	}
}
