// Package contract is the real-account contract suite (`make
// aws-contract`): what the local cloud cannot prove, asked of AWS itself on
// a sandbox account with a cluster and a deployed stack. It runs doctor;
// probes one spot and one on-demand claim through nodewright's own launch
// path with every write a DryRun, and has IAM evaluate each request under
// the deployed controller role's policy (iam:SimulatePrincipalPolicy);
// then launches one instance of the smallest on-demand type a NodePool
// allows and terminates it, cleaning up on any exit; and prints what it
// did. The same code runs against the local cloud in make test.
package contract

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/doctor"
)

// Options say where the suite runs.
type Options struct {
	Cluster, Region string
	Config          *apis.Config
	Clients         doctor.Clients
	// Out receives what the suite did, step by step.
	Out io.Writer
	// Launch runs the real launch and termination (else the suite stops
	// after the dry runs).
	Launch bool
	// RunningWait bounds the wait for the instance to run (default 5 minutes).
	RunningWait time.Duration
	// AfterLaunch, when set, is called once the instance exists (a test
	// cancels the context there, as a Ctrl-C would).
	AfterLaunch func()
}

// Run runs the suite; an error says which step failed. The launched
// instance and the launch templates the launch created are removed on
// every exit, ctx's cancellation included.
func Run(ctx context.Context, o Options) error {
	if o.RunningWait == 0 {
		o.RunningWait = 5 * time.Minute
	}
	say := func(format string, args ...any) { fmt.Fprintf(o.Out, format+"\n", args...) }
	say("== nodewright contract suite: cluster %s in %s", o.Cluster, o.Region)
	rep, err := doctor.Run(ctx, doctor.Options{Cluster: o.Cluster, Region: o.Region, Config: o.Config}, o.Clients)
	if err != nil {
		return err
	}
	say("== 1. doctor")
	if err := rep.WriteText(o.Out); err != nil {
		return err
	}
	if rep.Failed() {
		return errors.New("doctor: a check failed (above); fix it before the launches")
	}
	if !rep.Deployed {
		return fmt.Errorf("the stack %s is not deployed: the suite needs its roles and table", rep.Stack)
	}
	s, err := newSuite(ctx, o, rep, say)
	if err != nil {
		return err
	}
	say("== 2. dry-run launches under the controller role's policy (iam:SimulatePrincipalPolicy)")
	if err := s.dryRuns(ctx); err != nil {
		return err
	}
	if !o.Launch {
		say("== 3. real launch skipped")
		return nil
	}
	say("== 3. one real launch and termination")
	return s.launchAndTerminate(ctx)
}

// suite is one run's shared state.
type suite struct {
	o        Options
	say      func(string, ...any)
	arns     doctor.ARNs
	owner    string
	role     string
	provider *nwaws.Provider
	cat      *catalog.Catalog
}

func newSuite(ctx context.Context, o Options, rep *doctor.Report, say func(string, ...any)) (*suite, error) {
	role := rep.Outputs["ControllerRoleArn"]
	parts := strings.SplitN(role, ":", 6)
	if len(parts) < 6 {
		return nil, fmt.Errorf("controller role ARN %q: not an ARN", role)
	}
	arns := doctor.ARNs{Partition: parts[1], Region: o.Region, Account: parts[4]}
	owner := fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", arns.Partition, o.Region, arns.Account, rep.Outputs["TableName"])
	p, err := nwaws.New(nwaws.Options{ClusterName: o.Cluster, Region: o.Region, Owner: owner, Logger: slog.New(slog.DiscardHandler)},
		nwaws.Clients{EC2: o.Clients.EC2, SSM: o.Clients.SSM, EKS: o.Clients.EKS}, nil)
	if err != nil {
		return nil, err
	}
	cat, err := p.Catalog(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("instance types of %s: %w", o.Region, err)
	}
	return &suite{o: o, say: say, arns: arns, owner: owner, role: role, provider: p, cat: cat}, nil
}

// pick is the first NodePool (and its class) that may launch capacityType,
// with its types smallest first.
func (s *suite) pick(capacityType string) (*apis.NodePool, *apis.EC2NodeClass, []*catalog.InstanceType) {
	for _, np := range s.o.Config.NodePools {
		nc := s.o.Config.NodeClassFor(np)
		if nc == nil {
			continue
		}
		if types := doctor.PoolTypes(s.cat, np, nc, capacityType); len(types) > 0 {
			return np, nc, types
		}
	}
	return nil, nil, nil
}

// dryRuns probes one spot and one on-demand claim: the requests the
// launch path makes, each DryRun's answer and IAM's verdict on each
// request under the deployed controller role.
func (s *suite) dryRuns(ctx context.Context) error {
	var failed []string
	for _, ct := range []string{catalog.CapacityTypeSpot, catalog.CapacityTypeOnDemand} {
		np, nc, types := s.pick(ct)
		if np == nil {
			s.say("   %s: no NodePool launches %s: skipped", ct, ct)
			continue
		}
		pr := doctor.ProbeLaunch(ctx, doctor.ProbeInput{Cluster: s.o.Cluster, Region: s.o.Region, Owner: s.owner, NodePool: np, NodeClass: nc,
			CapacityType: ct, Types: types, EC2: s.o.Clients.EC2, SSM: s.o.Clients.SSM, EKS: s.o.Clients.EKS})
		if pr.Err != nil {
			return fmt.Errorf("%s claim of NodePool %s: the launch path failed: %w", ct, np.Name, pr.Err)
		}
		s.say("   %s claim of NodePool %s: %d launch template(s), %d fleet(s); would launch %s in %s", ct, np.Name, len(pr.Templates), len(pr.Fleets), pr.Instance.Type, pr.Instance.Zone)
		for _, d := range pr.DryRuns {
			verdict := "would succeed"
			switch {
			case d.Unmade:
				verdict = "not judged: its launch template does not exist yet"
			case !d.OK():
				verdict = d.Code + ": " + d.Message
				failed = append(failed, fmt.Sprintf("%s %s: %s", ct, d.Action, verdict))
			}
			s.say("     DryRun %-22s %s", d.Action, verdict)
		}
		role := ""
		if nc.Spec.Role != "" {
			role = nodeRoleARN(s.arns, nc.Spec.Role)
		}
		results, err := doctor.Simulate(ctx, s.o.Clients.IAM, s.role, doctor.LaunchRequests(pr, s.arns, role))
		if err != nil {
			return err
		}
		allowed := 0
		for _, r := range results {
			if r.Allowed() {
				allowed++
				continue
			}
			failed = append(failed, fmt.Sprintf("%s: %s", ct, r))
		}
		s.say("     IAM allows %d of %d requests under %s", allowed, len(results), s.role)
	}
	if len(failed) > 0 {
		return fmt.Errorf("dry-run launches: %s", strings.Join(failed, "; "))
	}
	return nil
}

func nodeRoleARN(a doctor.ARNs, role string) string {
	if strings.HasPrefix(role, "arn:") {
		return role
	}
	return fmt.Sprintf("arn:%s:iam::%s:role/%s", a.Partition, a.Account, role)
}
