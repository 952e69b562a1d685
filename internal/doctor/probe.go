package doctor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Fake IDs of what a probe's dry runs would have created: hex, so EC2 reads
// them as well-formed IDs of resources that do not exist.
const (
	fakeTemplatePrefix = "lt-0d0c7000000000"
	fakeInstanceID     = "i-0d0c70000000000f1"
)

func fakeTemplate(id string) bool { return strings.HasPrefix(id, fakeTemplatePrefix) }

// quiet discards the launch path's logs: a dry run launches nothing.
var quiet = slog.New(slog.DiscardHandler)

// probeTypes is how many of a NodePool's smallest types a probe offers.
const probeTypes = 4

// Probe is one NodeClaim's launch as nodewright's launch path
// (internal/aws's Launch) makes it, with every write sent as a DryRun: the
// requests it would make, and what EC2 answered them.
type Probe struct {
	NodePool, CapacityType string
	NodeClass              *apis.EC2NodeClass
	Claim                  *apis.NodeClaim
	// Templates and Fleets are the CreateLaunchTemplate and CreateFleet
	// requests, as sent (DryRun aside).
	Templates []ec2.CreateLaunchTemplateInput
	Fleets    []ec2.CreateFleetInput
	// TemplateIDs, TemplateTags and TemplateData are, by name, the ID and
	// tags of each launch template the fleets use (made by this probe, or
	// found), and the data of those this probe made.
	TemplateIDs  map[string]string
	TemplateTags map[string]map[string]string
	TemplateData map[string]ec2types.RequestLaunchTemplateData
	// PoolTags are the launch tags of the pool's claims (what a template
	// gives its network interfaces and spot requests).
	PoolTags map[string]string
	// Parameters are the SSM parameters the AMI selection read.
	Parameters []string
	// DryRuns are EC2's answers to the writes.
	DryRuns []DryRun
	// Instance is what Launch returned from the dry run's answer.
	Instance nwaws.Instance
	// Err is the launch path's own error (discovery, no offering).
	Err error
}

// DryRun is EC2's answer to one write sent with DryRun set.
type DryRun struct {
	Action string
	// Code is DryRunOperation when the call would have succeeded.
	Code, Message string
	// Unmade: the request names a launch template an earlier dry run only
	// pretended to make, and EC2 answered that it does not exist: the
	// fleet could not be judged.
	Unmade bool
}

// OK reports whether the call would have succeeded.
func (d DryRun) OK() bool { return d.Code == "DryRunOperation" }

// ProbeLaunch runs the launch path for one claim of np of capacityType on
// up to probeTypes of its smallest types, as the functions would with
// owner, through clients whose writes become dry runs.
func ProbeLaunch(ctx context.Context, p ProbeInput) *Probe {
	pr := &Probe{NodePool: p.NodePool.Name, CapacityType: p.CapacityType, NodeClass: p.NodeClass,
		TemplateIDs: map[string]string{}, TemplateTags: map[string]map[string]string{}, TemplateData: map[string]ec2types.RequestLaunchTemplateData{}}
	rec := &dryRunEC2{EC2API: p.EC2, probe: pr}
	ssmRec := &recordSSM{SSMAPI: p.SSM, probe: pr}
	prov, err := nwaws.New(nwaws.Options{ClusterName: p.Cluster, Region: p.Region, Owner: p.Owner, Logger: quiet},
		nwaws.Clients{EC2: rec, SSM: ssmRec, EKS: p.EKS}, nil)
	if err != nil {
		pr.Err = err
		return pr
	}
	types := p.Types
	if len(types) > probeTypes {
		types = types[:probeTypes]
	}
	names := make([]string, 0, len(types))
	for _, it := range types {
		names = append(names, it.Name)
	}
	pr.Claim = probeClaim(p.NodePool, p.CapacityType, names)
	pr.PoolTags = prov.PoolTags(p.NodePool.Name, p.NodeClass)
	pr.Instance, pr.Err = prov.Launch(ctx, nwaws.LaunchRequest{NodeClaim: pr.Claim, NodeClass: p.NodeClass, InstanceTypes: types, New: true})
	return pr
}

// ProbeInput is what ProbeLaunch launches and with which clients.
type ProbeInput struct {
	Cluster, Region, Owner string
	NodePool               *apis.NodePool
	NodeClass              *apis.EC2NodeClass
	CapacityType           string
	// Types are the instance types the claim may take, smallest first.
	Types []*catalog.InstanceType
	EC2   nwaws.EC2API
	SSM   nwaws.SSMAPI
	EKS   nwaws.EKSAPI
}

// Claim is a NodeClaim of np named name, for capacityType and the given
// instance types (as a probe makes it, under another name).
func Claim(name string, np *apis.NodePool, capacityType string, types []string) *apis.NodeClaim {
	c := probeClaim(np, capacityType, types)
	c.Name = name
	return c
}

// probeClaim is a claim of the pool narrowed to one capacity type and the
// given types (the pool's own capacity-type and instance-type requirements
// replaced, minValues dropped: a probe offers only a few types).
func probeClaim(np *apis.NodePool, capacityType string, types []string) *apis.NodeClaim {
	var reqs []apis.NodeSelectorRequirementWithMinValues
	for _, r := range np.Spec.Template.Spec.Requirements {
		if r.Key == apis.CapacityTypeLabelKey || r.Key == corev1.LabelInstanceTypeStable {
			continue
		}
		r.MinValues = nil
		reqs = append(reqs, r)
	}
	reqs = append(reqs,
		apis.NodeSelectorRequirementWithMinValues{Key: apis.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{capacityType}},
		apis.NodeSelectorRequirementWithMinValues{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: types})
	ts := np.Spec.Template.Spec
	return &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("doctor-%s-%s", np.Name, capacityType),
			Labels: map[string]string{apis.NodePoolLabelKey: np.Name}},
		Spec: apis.NodeClaimSpec{Requirements: reqs, Taints: ts.Taints, StartupTaints: ts.StartupTaints, NodeClassRef: ts.NodeClassRef},
	}
}

// dryRunEC2 passes reads through and sends CreateLaunchTemplate and
// CreateFleet with DryRun set, answering the launch path as if they had
// succeeded.
type dryRunEC2 struct {
	nwaws.EC2API
	mu    sync.Mutex
	probe *Probe
}

func (d *dryRunEC2) answer(action string, err error, unmade bool) {
	dr := DryRun{Action: action, Code: "OK"}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		dr.Code, dr.Message = ae.ErrorCode(), ae.ErrorMessage()
	} else if err != nil {
		dr.Code, dr.Message = "Error", err.Error()
	}
	// Only EC2's own "no such template" says the fleet could not be judged;
	// any other refusal is about the request itself.
	dr.Unmade = unmade && strings.HasPrefix(dr.Code, "InvalidLaunchTemplate")
	d.mu.Lock()
	d.probe.DryRuns = append(d.probe.DryRuns, dr)
	d.mu.Unlock()
}

func (d *dryRunEC2) DescribeLaunchTemplates(ctx context.Context, in *ec2.DescribeLaunchTemplatesInput, opts ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	out, err := d.EC2API.DescribeLaunchTemplates(ctx, in, opts...)
	if err == nil {
		d.mu.Lock()
		for _, lt := range out.LaunchTemplates {
			name := str(lt.LaunchTemplateName)
			d.probe.TemplateIDs[name], d.probe.TemplateTags[name] = str(lt.LaunchTemplateId), tagMap(lt.Tags)
		}
		d.mu.Unlock()
	}
	return out, err
}

func (d *dryRunEC2) CreateLaunchTemplate(ctx context.Context, in *ec2.CreateLaunchTemplateInput, opts ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	cp := *in
	cp.DryRun = sdkaws.Bool(true)
	_, err := d.EC2API.CreateLaunchTemplate(ctx, &cp, opts...)
	d.answer("CreateLaunchTemplate", err, false)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.probe.Templates = append(d.probe.Templates, *in)
	id := fmt.Sprintf("%s%03x", fakeTemplatePrefix, len(d.probe.Templates))
	var tags []ec2types.Tag
	for _, s := range in.TagSpecifications {
		tags = append(tags, s.Tags...)
	}
	name := str(in.LaunchTemplateName)
	d.probe.TemplateIDs[name], d.probe.TemplateTags[name] = id, tagMap(tags)
	if in.LaunchTemplateData != nil {
		d.probe.TemplateData[name] = *in.LaunchTemplateData
	}
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{
		LaunchTemplateId: sdkaws.String(id), LaunchTemplateName: in.LaunchTemplateName}}, nil
}

func (d *dryRunEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, opts ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	cp := *in
	cp.DryRun = sdkaws.Bool(true)
	_, err := d.EC2API.CreateFleet(ctx, &cp, opts...)
	d.mu.Lock()
	unmade := slices.ContainsFunc(in.LaunchTemplateConfigs, func(c ec2types.FleetLaunchTemplateConfigRequest) bool {
		spec := c.LaunchTemplateSpecification
		return spec != nil && (fakeTemplate(str(spec.LaunchTemplateId)) || fakeTemplate(d.probe.TemplateIDs[str(spec.LaunchTemplateName)]))
	})
	d.mu.Unlock()
	d.answer("CreateFleet", err, unmade)
	d.mu.Lock()
	d.probe.Fleets = append(d.probe.Fleets, *in)
	d.mu.Unlock()
	return fakeFleet(in), nil
}

// fakeFleet answers a fleet with one instance of its first override.
func fakeFleet(in *ec2.CreateFleetInput) *ec2.CreateFleetOutput {
	life := ec2types.InstanceLifecycleOnDemand
	if in.TargetCapacitySpecification != nil && in.TargetCapacitySpecification.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeSpot {
		life = ec2types.InstanceLifecycleSpot
	}
	fi := ec2types.CreateFleetInstance{InstanceIds: []string{fakeInstanceID}, Lifecycle: life}
	if len(in.LaunchTemplateConfigs) > 0 {
		cfg := in.LaunchTemplateConfigs[0]
		lo := &ec2types.LaunchTemplateAndOverridesResponse{}
		if s := cfg.LaunchTemplateSpecification; s != nil {
			lo.LaunchTemplateSpecification = &ec2types.FleetLaunchTemplateSpecification{LaunchTemplateId: s.LaunchTemplateId, LaunchTemplateName: s.LaunchTemplateName, Version: s.Version}
		}
		if len(cfg.Overrides) > 0 {
			ov := cfg.Overrides[0]
			lo.Overrides = &ec2types.FleetLaunchTemplateOverrides{InstanceType: ov.InstanceType, SubnetId: ov.SubnetId, AvailabilityZone: ov.AvailabilityZone, ImageId: ov.ImageId}
			fi.InstanceType = ov.InstanceType
		}
		fi.LaunchTemplateAndOverrides = lo
	}
	return &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{fi}}
}

// recordSSM records the parameters the AMI selection reads.
type recordSSM struct {
	nwaws.SSMAPI
	mu    sync.Mutex
	probe *Probe
}

func (r *recordSSM) GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	r.mu.Lock()
	if name := str(in.Name); !slices.Contains(r.probe.Parameters, name) {
		r.probe.Parameters = append(r.probe.Parameters, name)
	}
	r.mu.Unlock()
	return r.SSMAPI.GetParameter(ctx, in, opts...)
}

func tagMap(tags []ec2types.Tag) map[string]string {
	out := make(map[string]string, len(tags))
	for _, t := range tags {
		out[str(t.Key)] = str(t.Value)
	}
	return out
}

// probeLaunches probes one claim per NodePool and capacity type it allows.
func (e *env) probeLaunches(ctx context.Context) []*Probe {
	cat, err := e.catalog(ctx)
	if err != nil {
		return nil // checkVCPUQuotas reported it
	}
	var out []*Probe
	for _, np := range e.o.Config.NodePools {
		nc := e.o.Config.NodeClassFor(np)
		if nc == nil {
			continue
		}
		types := poolTypes(cat, np, nc)
		for _, ct := range []string{catalog.CapacityTypeSpot, catalog.CapacityTypeOnDemand} {
			if its := ofCapacity(types, ct); len(its) > 0 {
				out = append(out, ProbeLaunch(ctx, ProbeInput{Cluster: e.o.Cluster, Region: e.o.Region, Owner: e.owner(),
					NodePool: np, NodeClass: nc, CapacityType: ct, Types: its, EC2: e.c.EC2, SSM: e.c.SSM, EKS: e.c.EKS}))
			}
		}
	}
	return out
}
