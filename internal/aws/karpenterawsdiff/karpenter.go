package karpenterawsdiff

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	"github.com/patrickmn/go-cache"
	"github.com/samber/lo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	clock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/log"
	karpv1 "sigs.k8s.io/karpenter/pkg/apis/v1"
	"sigs.k8s.io/karpenter/pkg/events"
	coretest "sigs.k8s.io/karpenter/pkg/test"

	v1 "github.com/aws/karpenter-provider-aws/pkg/apis/v1"
	awscache "github.com/aws/karpenter-provider-aws/pkg/cache"
	"github.com/aws/karpenter-provider-aws/pkg/fake"
	"github.com/aws/karpenter-provider-aws/pkg/operator/options"
	"github.com/aws/karpenter-provider-aws/pkg/providers/amifamily"
	"github.com/aws/karpenter-provider-aws/pkg/providers/arczonalshift"
	"github.com/aws/karpenter-provider-aws/pkg/providers/capacityreservation"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instance"
	"github.com/aws/karpenter-provider-aws/pkg/providers/instancetype"
	"github.com/aws/karpenter-provider-aws/pkg/providers/launchtemplate"
	"github.com/aws/karpenter-provider-aws/pkg/providers/placementgroup"
	"github.com/aws/karpenter-provider-aws/pkg/providers/securitygroup"
	ssmp "github.com/aws/karpenter-provider-aws/pkg/providers/ssm"
	"github.com/aws/karpenter-provider-aws/pkg/providers/subnet"
	awstest "github.com/aws/karpenter-provider-aws/pkg/test"
	"github.com/aws/karpenter-provider-aws/pkg/utils"

	coreoptions "sigs.k8s.io/karpenter/pkg/operator/options"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
)

type (
	nwSubnet = nwaws.Subnet
	nwGroup  = nwaws.SecurityGroup
)

// kEC2 is Karpenter's own fake EC2 API (it records every input) with the
// world's images.
type kEC2 struct {
	*fake.EC2API
	w *world
}

func (e *kEC2) DescribeImages(_ context.Context, in *ec2.DescribeImagesInput, _ ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error) {
	e.CalledWithDescribeImagesInput.Add(in)
	return &ec2.DescribeImagesOutput{Images: e.w.describeImages(in)}, nil
}

// prices gives Karpenter nodewright's catalog prices, so both rank
// offerings on the same numbers.
type prices struct{ cat *catalog.Catalog }

func (prices) LivenessProbe(*http.Request) error { return nil }

func (p prices) InstanceTypes() []ec2types.InstanceType {
	return lo.Map(p.cat.Names(), func(n string, _ int) ec2types.InstanceType { return ec2types.InstanceType(n) })
}

func (p prices) OnDemandPrice(t ec2types.InstanceType) (float64, bool) {
	it, ok := p.cat.Get(string(t))
	if !ok {
		return 0, false
	}
	o, ok := it.CheapestOffering(func(o catalog.Offering) bool { return o.CapacityType == catalog.CapacityTypeOnDemand })
	return o.Price, ok
}

func (p prices) SpotPrice(t ec2types.InstanceType, zone string) (float64, bool) {
	it, ok := p.cat.Get(string(t))
	if !ok {
		return 0, false
	}
	o, ok := it.Offering(zone, catalog.CapacityTypeSpot)
	return o.Price, ok
}

func (prices) UpdateOnDemandPricing(context.Context) error { return nil }
func (prices) UpdateSpotPricing(context.Context) error     { return nil }

// version is the cluster's Kubernetes version, as Karpenter's version
// provider would discover it.
type version struct{ w *world }

func (v version) Get(context.Context) string { return v.w.version }

// karpenter is Karpenter-AWS's launch path wired as its operator wires it
// (pkg/operator, pkg/test/environment.go), over its fake EC2 API.
type karpenter struct {
	api          *kEC2
	amis         *amifamily.DefaultProvider
	reservations *capacityreservation.DefaultProvider
	types        *instancetype.DefaultProvider
	instances    *instance.DefaultProvider
}

var quietOnce sync.Once

func newCache() *cache.Cache { return cache.New(awscache.DefaultTTL, 0) }

// karpenterContext carries Karpenter's options (its operator's defaults
// and the world's cluster) and a logger that drops its logs.
func karpenterContext(ctx context.Context) context.Context {
	quietOnce.Do(func() { log.SetLogger(logr.Discard()) })
	ctx = log.IntoContext(ctx, logr.Discard())
	ctx = coreoptions.ToContext(ctx, coretest.Options())
	return options.ToContext(ctx, awstest.Options(awstest.OptionsFields{
		ClusterName: lo.ToPtr(clusterName), ClusterEndpoint: lo.ToPtr(clusterEndpoint), ClusterCABundle: lo.ToPtr(caBundle),
	}))
}

func newKarpenter(ctx context.Context, w *world) *karpenter {
	api := &kEC2{EC2API: fake.NewEC2API(), w: w}
	api.DescribeInstanceTypesOutput.Set(&ec2.DescribeInstanceTypesOutput{InstanceTypes: w.input.InstanceTypes})
	api.DescribeInstanceTypeOfferingsOutput.Set(&ec2.DescribeInstanceTypeOfferingsOutput{InstanceTypeOfferings: w.input.Offerings})
	api.DescribeCapacityReservationsOutput.Set(&ec2.DescribeCapacityReservationsOutput{CapacityReservations: w.reservations()})
	clk := clock.NewFakeClock(worldNow)
	unavailable := awscache.NewUnavailableOfferings()
	subnets := subnet.NewDefaultProvider(api, newCache(), cache.New(awscache.AvailableIPAddressTTL, 0))
	groups := securitygroup.NewDefaultProvider(api, newCache())
	amis := amifamily.NewDefaultProvider(clk, version{w}, ssmp.NewDefaultProvider(ssmAPI{w}, newCache()), api, newCache())
	pgs := placementgroup.NewProvider(api, newCache(), cache.New(awscache.PlacementGroupAvailabilityTTL, 0))
	reservations := capacityreservation.NewProvider(api, clk, newCache(), cache.New(24*time.Hour, 0))
	zonal := arczonalshift.NewProvider(fake.NewARCZonalShiftAPI(), clk, "")
	types := instancetype.NewDefaultProvider(newCache(), newCache(), cache.New(awscache.DiscoveredCapacityCacheTTL, 0), api, subnets,
		prices{w.cat}, reservations, pgs, unavailable, instancetype.NewDefaultResolver(region), zonal, nil)
	cidr, dns := w.shape.serviceNetwork()
	lts := launchtemplate.NewDefaultProvider(ctx, newCache(), api, eksAPI{w}, amifamily.NewDefaultResolver(region), groups, subnets, pgs,
		lo.ToPtr(caBundle), make(chan struct{}), net.ParseIP(dns), clusterEndpoint)
	lts.ClusterCIDR.Store(lo.ToPtr(cidr))
	instances := instance.NewDefaultProvider(ctx, region, events.NewRecorder(&record.FakeRecorder{}), api, unavailable, subnets, lts,
		reservations, pgs, zonal, cache.New(cache.NoExpiration, 0))
	return &karpenter{api: api, amis: amis, reservations: reservations, types: types, instances: instances}
}

// reconcileStatus fills the class's status as Karpenter's EC2NodeClass
// controller does (pkg/controllers/nodeclass): AMIs and reservations from
// its own providers; subnets, security groups and the instance profile
// are nodewright's findings, so both launch into the same ones.
func (k *karpenter) reconcileStatus(ctx context.Context, nc *v1.EC2NodeClass, d discovery) error {
	subnets := append([]nwSubnet(nil), d.Subnets...)
	sort.SliceStable(subnets, func(i, j int) bool {
		if subnets[i].AvailableIPs != subnets[j].AvailableIPs {
			return subnets[i].AvailableIPs > subnets[j].AvailableIPs
		}
		return subnets[i].ID < subnets[j].ID
	})
	nc.Status.Subnets = lo.Map(subnets, func(s nwSubnet, _ int) v1.Subnet { return v1.Subnet{ID: s.ID, Zone: s.Zone, ZoneID: s.ZoneID} })
	nc.Status.SecurityGroups = lo.Map(d.SecurityGroups, func(g nwGroup, _ int) v1.SecurityGroup { return v1.SecurityGroup{ID: g.ID, Name: g.Name} })
	sort.Slice(nc.Status.SecurityGroups, func(i, j int) bool { return nc.Status.SecurityGroups[i].ID < nc.Status.SecurityGroups[j].ID })
	nc.Status.InstanceProfile = d.Profile
	amis, err := k.amis.List(ctx, nc)
	if err != nil {
		return fmt.Errorf("karpenter AMIs: %w", err)
	}
	if len(amis) == 0 {
		return fmt.Errorf("karpenter AMIs: none for %v", nc.Spec.AMISelectorTerms)
	}
	nc.Status.AMIs = lo.Map(amis, func(a amifamily.AMI, _ int) v1.AMI {
		reqs := lo.Map(a.Requirements.NodeSelectorRequirements(), func(r karpv1.NodeSelectorRequirementWithMinValues, _ int) corev1.NodeSelectorRequirement {
			return corev1.NodeSelectorRequirement{Key: r.Key, Operator: r.Operator, Values: r.Values}
		})
		sort.Slice(reqs, func(i, j int) bool {
			if len(reqs[i].Key) != len(reqs[j].Key) {
				return len(reqs[i].Key) < len(reqs[j].Key)
			}
			return reqs[i].Key < reqs[j].Key
		})
		return v1.AMI{Name: a.Name, ID: a.AmiID, Deprecated: a.Deprecated, Requirements: reqs}
	})
	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 {
		crs, err := k.reservations.List(ctx, nc.Spec.CapacityReservationSelectorTerms...)
		if err != nil {
			return fmt.Errorf("karpenter capacity reservations: %w", err)
		}
		sort.Slice(crs, func(i, j int) bool { return *crs[i].CapacityReservationId < *crs[j].CapacityReservationId })
		nc.Status.CapacityReservations = nil
		for _, cr := range crs {
			r, err := v1.CapacityReservationFromEC2(clock.NewFakeClock(worldNow), cr)
			if err != nil {
				return fmt.Errorf("karpenter capacity reservation: %w", err)
			}
			nc.Status.CapacityReservations = append(nc.Status.CapacityReservations, r)
		}
	}
	return nil
}

// launch is Karpenter's CloudProvider.Create from the class's instance
// types on: its tags (utils.GetTags), then the instance provider.
func (k *karpenter) launch(ctx context.Context, nc *v1.EC2NodeClass, claim *karpv1.NodeClaim) (Requests, error) {
	if err := k.types.UpdateInstanceTypes(ctx); err != nil {
		return Requests{}, fmt.Errorf("karpenter instance types: %w", err)
	}
	if err := k.types.UpdateInstanceTypeOfferings(ctx); err != nil {
		return Requests{}, fmt.Errorf("karpenter offerings: %w", err)
	}
	its, err := k.types.List(ctx, nc)
	if err != nil {
		return Requests{}, fmt.Errorf("karpenter instance types: %w", err)
	}
	tags, err := utils.GetTags(nc, claim, clusterName)
	if err != nil {
		return Requests{}, fmt.Errorf("karpenter tags: %w", err)
	}
	_, err = k.instances.Create(ctx, nc, claim, tags, its)
	var out Requests
	k.api.CreateLaunchTemplateBehavior.CalledWithInput.ForEach(func(in *ec2.CreateLaunchTemplateInput) { out.Templates = append(out.Templates, in) })
	if n := k.api.CreateFleetBehavior.CalledWithInput.Len(); n > 0 {
		out.Fleet = k.api.CreateFleetBehavior.CalledWithInput.At(n - 1)
	}
	if err != nil {
		return out, fmt.Errorf("karpenter launch: %w", err)
	}
	return out, nil
}
