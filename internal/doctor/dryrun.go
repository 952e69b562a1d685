package doctor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
)

// checkDryRuns reports what EC2 answered the probes' writes, sent with the
// caller's own rights and DryRun set: whether the requests nodewright makes
// are valid here (their shape, tags, images) and whether the caller could
// make them. The functions' own rights are the iam/controller check.
func (e *env) checkDryRuns(ctx context.Context, probes []*Probe) {
	for _, action := range []string{"CreateLaunchTemplate", "CreateFleet"} {
		e.checkDryRun(action, probes)
	}
	e.checkTerminateDryRun(ctx)
}

func (e *env) checkDryRun(action string, probes []*Probe) {
	name := "dryrun/" + action
	var ok, unmade, bad []string
	for _, pr := range probes {
		what := pr.NodePool + " " + pr.CapacityType
		if pr.Err != nil {
			if action == "CreateFleet" {
				e.fail("launch/"+pr.NodePool+"/"+pr.CapacityType, "see the checks of the NodePool's EC2NodeClass above",
					"nodewright's launch path cannot make the launch: %v", pr.Err)
			}
			continue
		}
		for _, d := range pr.DryRuns {
			switch {
			case d.Action != action:
			case d.OK():
				ok = append(ok, what)
			case d.Unmade:
				unmade = append(unmade, what)
			default:
				bad = append(bad, fmt.Sprintf("%s: %s: %s", what, d.Code, d.Message))
			}
		}
	}
	ok, unmade, bad = slices.Compact(ok), slices.Compact(unmade), slices.Compact(bad)
	switch {
	case len(bad) > 0:
		fix := "the request nodewright's launch path makes is refused here: report it with this message"
		if strings.Contains(strings.Join(bad, " "), "UnauthorizedOperation") {
			fix = "your own credentials may not " + action + ": the dry run checks the request with your rights (the functions' are the iam/controller check)"
		}
		e.fail(name, fix, "EC2 refuses %s: %s", action, strings.Join(bad, "; "))
	case len(ok) > 0:
		e.pass(name, "EC2 would accept the %s requests of %s (DryRun with your credentials)", action, strings.Join(ok, ", "))
	case len(unmade) > 0:
		e.warn(name, "nothing to do: the first launch creates the template, and doctor then dry-runs the fleet",
			"not judged for %s: EC2 dry-runs a fleet only from a launch template that exists, and nodewright has not made it yet (its authorization is in iam/controller)", strings.Join(unmade, ", "))
	case action == "CreateLaunchTemplate" && len(probes) > 0:
		e.pass(name, "the launch templates exist already: nothing to create")
	default:
		e.warn(name, "check the NodePools and EC2NodeClasses above", "no launch to try: no NodePool could launch")
	}
}

// checkTerminateDryRun dry-runs TerminateInstances on one of the stack's
// instances, when it has one.
func (e *env) checkTerminateDryRun(ctx context.Context) {
	name := "dryrun/TerminateInstances"
	if !e.deployed() {
		e.warn(name, e.deployCommand(), "tried on the stack's instances once it has some")
		return
	}
	insts, err := e.aws().ListClusterInstances(ctx)
	if err != nil {
		e.fail(name, "your credentials need ec2:DescribeInstances", "%v", err)
		return
	}
	if len(insts) == 0 {
		e.pass(name, "the stack has no instance to try it on")
		return
	}
	id := insts[0].ID
	_, err = e.c.EC2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}, DryRun: sdkaws.Bool(true)})
	var ae smithy.APIError
	switch {
	case errors.As(err, &ae) && ae.ErrorCode() == "DryRunOperation":
		e.pass(name, "you could terminate %s, an instance of the stack (DryRun)", id)
	case err == nil:
		e.fail(name, "check the EC2 endpoint: a DryRun call must never succeed", "TerminateInstances with DryRun answered success for %s", id)
	default:
		e.fail(name, "your credentials need ec2:TerminateInstances on the stack's instances to clean up by hand", "DryRun TerminateInstances %s: %v", id, err)
	}
}
