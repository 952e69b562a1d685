package aws_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
)

// TestAnotherStacksInstancesAreNotOurs: two nodewright stacks for the same
// cluster (a second deployment, or a re-created table) launch instances with
// the same cluster, managed-by and nodepool tags; only TagOwner tells them
// apart. Each stack lists, garbage-collects and terminates only its own, so
// a fresh table's first pass can never take the other stack's fleet.
func TestAnotherStacksInstancesAreNotOurs(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	other, err := nwaws.New(nwaws.Options{ClusterName: testCluster, Region: testRegion, Owner: testOwner + "-other", Now: e.clock.Now, Logger: quiet}, e.clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	ours := e.launch(t, "default-own1", nc, "c5.large")
	theirs, err := other.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim("default-other1"), NodeClass: nc, InstanceTypes: e.types("c5.large")})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := e.p.GetInstance(e.ctx, ours.ID); got.Owner != testOwner || got.Tags[nwaws.TagOwner] != testOwner {
		t.Fatalf("our instance's owner %q, tags %v: want %s=%s", got.Owner, got.Tags, nwaws.TagOwner, testOwner)
	}

	listed, err := e.p.ListClusterInstances(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0].ID != ours.ID {
		t.Errorf("ListClusterInstances = %+v, want only ours (%s), not the other stack's %s", listed, ours.ID, theirs.ID)
	}
	err = e.p.Terminate(e.ctx, theirs.ID)
	if !errors.Is(err, nwaws.ErrNotOwned) || !strings.Contains(err.Error(), nwaws.TagOwner) {
		t.Fatalf("terminating the other stack's instance: want ErrNotOwned naming %s, got %v", nwaws.TagOwner, err)
	}
	if n := len(e.sim.Calls("ec2", "TerminateInstances")); n != 0 {
		t.Errorf("%d TerminateInstances calls, want none", n)
	}
	if got, err := e.p.GetInstance(e.ctx, theirs.ID); err != nil || (got.State != "pending" && got.State != "running") {
		t.Errorf("the other stack's instance touched: %v %+v", err, got)
	}

	mine, err := e.p.LaunchTemplates(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	theirTemplates, err := other.LaunchTemplates(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(mine) == 0 || len(theirTemplates) == 0 {
		t.Fatalf("launch templates: ours %v, theirs %v", mine, theirTemplates)
	}
	for _, lt := range mine {
		for _, o := range theirTemplates {
			if lt.Name == o.Name {
				t.Errorf("both stacks list launch template %s: one stack's template GC could delete the other's", lt.Name)
			}
		}
	}
}

// TestSpotLaunchTagsItsRequest: a spot CreateFleet creates a
// spot-instances-request too, and the stack's IAM policy (like Karpenter's)
// allows the launch only if every resource it creates carries the request
// tags. The request must be tagged like the instance.
func TestSpotLaunchTagsItsRequest(t *testing.T) {
	e := newEnv(t, false)
	claim := newClaim("default-spot1", in(apis.CapacityTypeLabelKey, catalog.CapacityTypeSpot))
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: claim, NodeClass: nodeClass("al2023@latest"), InstanceTypes: e.types("c5.large", "m5.large")})
	if err != nil {
		t.Fatal(err)
	}
	if inst.CapacityType != catalog.CapacityTypeSpot {
		t.Fatalf("launched %s, want spot", inst.CapacityType)
	}
	calls := e.sim.Calls("ec2", "CreateFleet")
	if len(calls) == 0 {
		t.Fatal("no CreateFleet call")
	}
	tags := tagSpec(calls[len(calls)-1].Params, "spot-instances-request")
	want := map[string]string{nwaws.TagOwner: testOwner, nwaws.TagManagedBy: nwaws.ManagedBy, nwaws.TagNodePool: "default",
		nwaws.TagNodeClaim: claim.Name, nwaws.ClusterTagKey(testCluster): "owned"}
	for k, v := range want {
		if tags[k] != v {
			t.Errorf("spot-instances-request tag %s = %q, want %q (request tags %v)", k, tags[k], v, tags)
		}
	}
}

// tagSpec returns the tags of the TagSpecification of resourceType in an
// EC2 query request's parameters.
func tagSpec(params map[string]string, resourceType string) map[string]string {
	for k, v := range params {
		prefix, ok := strings.CutSuffix(k, ".ResourceType")
		if !ok || v != resourceType || !strings.HasPrefix(prefix, "TagSpecification.") {
			continue
		}
		tags := map[string]string{}
		for tk, key := range params {
			rest, ok := strings.CutPrefix(tk, prefix+".Tag.")
			if idx, isKey := strings.CutSuffix(rest, ".Key"); ok && isKey {
				tags[key] = params[prefix+".Tag."+idx+".Value"]
			}
		}
		return tags
	}
	return nil
}
