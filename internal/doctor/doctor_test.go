package doctor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/doctor"
	"github.com/nodewright/nodewright/internal/doctor/doctortest"
	"github.com/nodewright/nodewright/internal/localcloud"
)

// mustStatus fails the test unless the check named name has status want
// and, when it does not pass, a fix containing fix.
func mustStatus(t *testing.T, r *doctor.Report, name string, want doctor.Status, fix string) doctor.Check {
	t.Helper()
	c, ok := r.Find(name)
	if !ok {
		t.Fatalf("no check %s in:\n%s", name, text(r))
	}
	if c.Status != want || !strings.Contains(c.Fix, fix) {
		t.Fatalf("check %s: %s %q (fix %q), want %s with a fix containing %q\n%s", name, c.Status, c.Message, c.Fix, want, fix, text(r))
	}
	return c
}

func text(r *doctor.Report) string {
	var b bytes.Buffer
	_ = r.WriteText(&b)
	return b.String()
}

func noFailure(t *testing.T, r *doctor.Report) {
	t.Helper()
	if r.Failed() {
		t.Fatalf("doctor failed on a healthy account:\n%s", text(r))
	}
}

// Doctor on the local cloud: before the deploy the stack's checks warn and
// nothing fails; after it everything the stack needs passes, the deployed
// roles' policies allow every request the launch path makes
// (SimulatePrincipalPolicy); then each broken account fails its check with
// its fix, and passes again once repaired.
func TestDoctorOnTheLocalCloud(t *testing.T) {
	e := doctortest.New(t)
	before := e.Run(t)
	noFailure(t, before)
	mustStatus(t, before, "stack", doctor.Warn, "cdk deploy")
	mustStatus(t, before, "iam/controller", doctor.Warn, "cdk deploy")
	mustStatus(t, before, "dryrun/CreateLaunchTemplate", doctor.Pass, "")

	e.Deploy(t)
	r := e.Run(t)
	noFailure(t, r)
	for _, name := range []string{"cluster", "authentication-mode", "stack", "access-entries", "subnets/default", "security-groups/default",
		"amis/default", "spot-service-linked-role", "lambda-concurrency", "iam/controller", "iam/webhook", "iam/registrar", "dryrun/CreateLaunchTemplate"} {
		mustStatus(t, r, name, doctor.Pass, "")
	}
	mustStatus(t, r, "ec2-vcpu-quota/on-demand/L-1216C47A", doctor.Pass, "")
	mustStatus(t, r, "ec2-vcpu-quota/spot/L-34B43A08", doctor.Pass, "")
	t.Logf("doctor on a deployed stack:\n%s", text(r))

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back doctor.Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || len(back.Checks) != len(r.Checks) || !back.Deployed {
		t.Fatalf("JSON report does not read back (%v): %s", err, js.String())
	}

	t.Run("wrong authentication mode", func(t *testing.T) {
		e.Cloud.AWS.SetEKSAuthenticationMode("CONFIG_MAP")
		defer e.Cloud.AWS.SetEKSAuthenticationMode("API_AND_CONFIG_MAP")
		mustStatus(t, e.Run(t), "authentication-mode", doctor.Fail, "authenticationMode=API_AND_CONFIG_MAP")
	})
	t.Run("no spot service-linked role", func(t *testing.T) {
		e.Cloud.AWS.SetServiceLinkedRole(doctor.SpotServiceLinkedRole, false)
		defer e.Cloud.AWS.SetServiceLinkedRole(doctor.SpotServiceLinkedRole, true)
		mustStatus(t, e.Run(t), "spot-service-linked-role", doctor.Fail, "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com")
	})
	t.Run("EC2 vCPU quota too low", func(t *testing.T) {
		e.Cloud.AWS.SetServiceQuota("ec2", "L-34B43A08", 1)
		defer e.Cloud.AWS.SetServiceQuota("ec2", "L-34B43A08", 640)
		mustStatus(t, e.Run(t), "ec2-vcpu-quota/spot/L-34B43A08", doctor.Fail, "--quota-code L-34B43A08")
	})
	t.Run("Lambda concurrency too low", func(t *testing.T) {
		e.Cloud.AWS.SetLambdaConcurrency(50, 0)
		defer e.Cloud.AWS.SetLambdaConcurrency(1000, 0)
		mustStatus(t, e.Run(t), "lambda-concurrency", doctor.Fail, "--quota-code L-B99A9384")
	})
	t.Run("a policy statement dropped", func(t *testing.T) {
		t.Setenv(localcloud.EnvIAMDrop, e.StatementID(t, "LaunchTaggedForThisCluster"))
		e.Deploy(t)
		defer func() {
			t.Setenv(localcloud.EnvIAMDrop, "")
			e.Deploy(t)
		}()
		c := mustStatus(t, e.Run(t), "iam/controller", doctor.Fail, "deploy the stack again")
		if !strings.Contains(c.Message, "ec2:CreateFleet on arn:aws:ec2:") || !strings.Contains(c.Message, "implicitDeny") {
			t.Errorf("the denial should name the fleet's request and IAM's implicitDeny: %s", c.Message)
		}
	})
	t.Run("an access entry missing", func(t *testing.T) {
		e.Cloud.AWS.DeleteAccessEntry("arn:aws:iam::111122223333:role/KarpenterNodeRole-" + e.Cluster)
		defer e.Deploy(t)
		mustStatus(t, e.Run(t), "access-entries", doctor.Fail, "aws eks create-access-entry")
	})
	noFailure(t, e.Run(t))
	t.Run("once the stack has launched", func(t *testing.T) {
		id := launch(t, e)
		r := e.Run(t)
		mustStatus(t, r, "dryrun/CreateFleet", doctor.Pass, "")
		if c := mustStatus(t, r, "dryrun/TerminateInstances", doctor.Pass, ""); !strings.Contains(c.Message, id) {
			t.Errorf("the terminate dry run should name the stack's instance %s: %s", id, c.Message)
		}
		mustStatus(t, r, "other-stacks-instances", doctor.Pass, "")
	})
	t.Run("instances a deleted stack left", func(t *testing.T) {
		// The owner of a stack deleted before its nodes: its table, kept
		// by deletion protection, is no later stack's.
		id := launchFor(t, e, e.Cloud.TableARN("nodewright-"+e.Cluster+"-OldTable"), "orphan-1")
		defer func() { _ = e.Cloud.AWS.EC2().Terminate(id, "test cleanup") }()
		c := mustStatus(t, e.Run(t), "other-stacks-instances", doctor.Warn, "aws ec2 terminate-instances --instance-ids "+id)
		if !strings.Contains(c.Message, "OldTable") {
			t.Errorf("the warning should name the other owner: %s", c.Message)
		}
	})
	t.Run("subnets without the discovery tag", func(t *testing.T) {
		if n := e.Cloud.AWS.EC2().RemoveSubnetTag("karpenter.sh/discovery"); n == 0 {
			t.Fatal("no subnet carried the discovery tag")
		}
		r := e.Run(t)
		mustStatus(t, r, "subnets/default", doctor.Fail, "aws ec2 create-tags --resources subnet-... --tags Key=karpenter.sh/discovery,Value="+e.Cluster)
	})
}

// launch launches an on-demand instance for the NodePool as the stack's
// functions would (its owner tags, its launch templates), with the
// administrator's credentials, and returns its ID.
func launch(t *testing.T, e *doctortest.Env) string {
	t.Helper()
	return launchFor(t, e, e.Cloud.TableARN(e.Table), "launched-1")
}

// launchFor launches as launch does, for the stack whose owner value is
// owner.
func launchFor(t *testing.T, e *doctortest.Env, owner, claim string) string {
	t.Helper()
	ctx := context.Background()
	clients := e.Clients(t)
	p, err := nwaws.New(nwaws.Options{ClusterName: e.Cluster, Region: e.Region, Owner: owner},
		nwaws.Clients{EC2: clients.EC2, SSM: clients.SSM, EKS: clients.EKS}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cat, err := p.Catalog(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	np, nc := e.Config.NodePools[0], e.Config.NodeClasses[0]
	types := doctor.PoolTypes(cat, np, nc, "on-demand")[:4]
	names := make([]string, 0, len(types))
	for _, it := range types {
		names = append(names, it.Name)
	}
	inst, err := p.Launch(ctx, nwaws.LaunchRequest{NodeClaim: doctor.Claim(claim, np, "on-demand", names), NodeClass: nc, InstanceTypes: types, New: true})
	if err != nil {
		t.Fatal(err)
	}
	// EC2 lists a launched instance only after a moment (simulator rule
	// launch-consistency); doctor reads the listing.
	deadline := time.Now().Add(time.Minute)
	for {
		insts, err := p.ListClusterInstances(ctx)
		if err == nil && slices.ContainsFunc(insts, func(i nwaws.Instance) bool { return i.ID == inst.ID }) {
			return inst.ID
		}
		if time.Now().After(deadline) {
			t.Fatalf("launched %s never listed: %v", inst.ID, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
