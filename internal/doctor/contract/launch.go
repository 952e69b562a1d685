package contract

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/doctor"
)

// cleanupTimeout bounds the cleanup, which runs on a context of its own
// (the run's may be cancelled: a signal).
const cleanupTimeout = 2 * time.Minute

// launchAndTerminate launches one instance of the smallest on-demand type
// a NodePool allows, through nodewright's launch path with the caller's
// credentials and the stack's owner tags, waits for it to run and
// terminates it. Whatever happens (an error, ctx cancelled by a signal),
// the deferred cleanup terminates every instance tagged for the claim and
// deletes the launch templates that did not exist before.
func (s *suite) launchAndTerminate(ctx context.Context) (err error) {
	np, nc, types := s.pick(catalog.CapacityTypeOnDemand)
	if np == nil {
		return fmt.Errorf("no NodePool launches on-demand: nothing to launch")
	}
	smallest := types[0]
	claim := doctor.Claim(fmt.Sprintf("contract-%d", time.Now().Unix()), np, catalog.CapacityTypeOnDemand, []string{smallest.Name})
	before, err := s.provider.LaunchTemplates(ctx)
	if err != nil {
		return err
	}
	var launched string // the instance Launch returned, if any
	defer func() {
		if cerr := s.cleanup(claim.Name, launched, before); cerr != nil && err == nil {
			err = cerr
		}
	}()
	start := time.Now()
	inst, err := s.provider.Launch(ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nc, InstanceTypes: []*catalog.InstanceType{smallest}, New: true})
	launched = inst.ID
	if err != nil {
		return fmt.Errorf("launch %s for NodePool %s: %w", smallest.Name, np.Name, err)
	}
	s.say("   launched %s (%s, %s, %s) for claim %s in %s", inst.ID, inst.Type, inst.Zone, inst.CapacityType, claim.Name, time.Since(start).Round(time.Millisecond))
	if s.o.AfterLaunch != nil {
		s.o.AfterLaunch()
	}
	if err := s.awaitState(ctx, inst.ID, "running", s.o.RunningWait); err != nil {
		return err
	}
	s.say("   %s is running after %s", inst.ID, time.Since(start).Round(time.Second))
	if err := s.fleetDryRun(ctx, np, nc, smallest); err != nil {
		return err
	}
	if err := s.provider.Terminate(ctx, inst.ID); err != nil {
		return fmt.Errorf("terminate %s: %w", inst.ID, err)
	}
	s.say("   terminated %s", inst.ID)
	return nil
}

// terminateOnceVisible terminates an instance this run launched, retrying
// while EC2 does not show it yet; ctx bounds the wait.
func (s *suite) terminateOnceVisible(ctx context.Context, id string) error {
	for {
		err := s.provider.Terminate(ctx, id)
		if !errors.Is(err, nwaws.ErrInstanceNotVisible) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("instance %s never became visible to terminate it: %w", id, err)
		case <-time.After(time.Second):
		}
	}
}

// awaitState polls the instance until it is in state (or gone past it).
func (s *suite) awaitState(ctx context.Context, id, state string, wait time.Duration) error {
	deadline := time.Now().Add(wait)
	for {
		inst, err := s.provider.GetInstance(ctx, id)
		if err == nil && inst.State == state {
			return nil
		}
		if err == nil && (inst.State == "shutting-down" || inst.State == "terminated") {
			return fmt.Errorf("instance %s is %s, not %s", id, inst.State, state)
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("its last state is %q", inst.State)
			}
			return fmt.Errorf("instance %s not %s after %s: %w", id, state, wait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Second):
		}
	}
}

// cleanup terminates every live instance tagged for the claim, and the one
// the launch returned, and deletes the launch templates the launch
// created, on a context of its own.
func (s *suite) cleanup(claim, launched string, before []nwaws.LaunchTemplate) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	insts, err := s.provider.ListClusterInstances(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	var ids []string
	for _, i := range insts {
		if i.NodeClaim == claim && i.State != "shutting-down" && i.State != "terminated" {
			ids = append(ids, i.ID)
		}
	}
	// EC2 may not list an instance launched moments ago (eventual
	// consistency): the id the launch returned is terminated all the same.
	if launched != "" && !slices.Contains(ids, launched) {
		ids = append(ids, launched)
	}
	for _, id := range ids {
		if err := s.terminateOnceVisible(ctx, id); err != nil {
			return fmt.Errorf("cleanup: %w", err)
		}
	}
	if len(ids) > 0 {
		s.say("   cleanup: terminated %v", ids)
	}
	after, err := s.provider.LaunchTemplates(ctx)
	if err != nil {
		return fmt.Errorf("cleanup: %w", err)
	}
	for _, lt := range after {
		if slices.ContainsFunc(before, func(b nwaws.LaunchTemplate) bool { return b.Name == lt.Name }) {
			continue
		}
		_, err := s.o.Clients.EC2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: sdkaws.String(lt.Name)})
		var ae smithy.APIError
		if errors.As(err, &ae) && strings.HasSuffix(ae.ErrorCode(), "NotFoundException") {
			continue // the stack's garbage collection was first
		}
		if err != nil {
			return fmt.Errorf("cleanup: delete launch template %s: %w", lt.Name, err)
		}
		s.say("   cleanup: deleted launch template %s", lt.Name)
	}
	s.say("   cleanup: done")
	return nil
}

// fleetDryRun probes the launched claim's shape again now that its launch
// template exists, so EC2 judges the CreateFleet DryRun itself (before the
// first launch it cannot: the fleet would name a template not yet made).
func (s *suite) fleetDryRun(ctx context.Context, np *apis.NodePool, nc *apis.EC2NodeClass, it *catalog.InstanceType) error {
	pr := doctor.ProbeLaunch(ctx, doctor.ProbeInput{Cluster: s.o.Cluster, Region: s.o.Region, Owner: s.owner, NodePool: np, NodeClass: nc,
		CapacityType: catalog.CapacityTypeOnDemand, Types: []*catalog.InstanceType{it}, EC2: s.o.Clients.EC2, SSM: s.o.Clients.SSM, EKS: s.o.Clients.EKS})
	if pr.Err != nil {
		return fmt.Errorf("dry-run fleet from the existing template: %w", pr.Err)
	}
	for _, d := range pr.DryRuns {
		if d.Action != "CreateFleet" {
			continue
		}
		if !d.OK() {
			return fmt.Errorf("DryRun CreateFleet from the existing launch template: %s: %s", d.Code, d.Message)
		}
		s.say("   DryRun CreateFleet from the existing launch template would succeed")
	}
	return nil
}
