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
// spot-instances-request and network interfaces too, and the stack's IAM
// policy (like Karpenter's) allows the launch only if each carries the
// request tags. An instant fleet cannot tag them (CreateFleet's
// TagSpecifications take fleet, instance and volume), so the spot launch's
// template tags both, and the on-demand launch of the same NodePool uses a
// template of its own that tags no spot request (EC2 fails an on-demand
// launch from one that does: aws/karpenter-provider-aws #5850).
func TestSpotLaunchTagsItsRequest(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	spot := newClaim("default-spot1", in(apis.CapacityTypeLabelKey, catalog.CapacityTypeSpot))
	spotInst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: spot, NodeClass: nc, InstanceTypes: e.types("c5.large", "m5.large")})
	if err != nil {
		t.Fatal(err)
	}
	if spotInst.CapacityType != catalog.CapacityTypeSpot {
		t.Fatalf("launched %s, want spot", spotInst.CapacityType)
	}
	od := newClaim("default-od1", in(apis.CapacityTypeLabelKey, catalog.CapacityTypeOnDemand))
	odInst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: od, NodeClass: nc, InstanceTypes: e.types("c5.large", "m5.large")})
	if err != nil {
		t.Fatal(err)
	}
	if spotInst.LaunchTemplate == odInst.LaunchTemplate {
		t.Fatalf("spot and on-demand launches share template %s", spotInst.LaunchTemplate)
	}
	for _, c := range e.sim.Calls("ec2", "CreateFleet") {
		for _, rt := range []string{"spot-instances-request", "network-interface"} {
			if tags := tagSpec(c.Params, rt); tags != nil {
				t.Errorf("CreateFleet tags %s (%v): an instant fleet cannot", rt, tags)
			}
		}
	}
	for _, c := range e.sim.Calls("ec2", "CreateLaunchTemplate") {
		switch c.Params["LaunchTemplateName"] {
		case spotInst.LaunchTemplate:
			checkTemplateResourceTags(t, c.Params, true)
		case odInst.LaunchTemplate:
			checkTemplateResourceTags(t, c.Params, false)
		}
	}
}

// checkTemplateResourceTags checks a CreateLaunchTemplate request's data
// tags: the network interfaces always, spot requests only in a spot
// template, with the NodePool's tags the stack's IAM policy asks for and
// none of one claim's own.
func checkTemplateResourceTags(t *testing.T, params map[string]string, spot bool) {
	t.Helper()
	want := map[string]string{nwaws.TagOwner: testOwner, nwaws.TagManagedBy: nwaws.ManagedBy, nwaws.TagNodePool: "default",
		nwaws.TagEKSClusterName: testCluster, nwaws.ClusterTagKey(testCluster): "owned"}
	kinds := []string{"network-interface"}
	if spot {
		kinds = append(kinds, "spot-instances-request")
	} else if tags := templateTagSpec(params, "spot-instances-request"); tags != nil {
		t.Errorf("template %s of a launch that is not spot tags spot requests: EC2 fails its launches", params["LaunchTemplateName"])
	}
	for _, rt := range kinds {
		tags := templateTagSpec(params, rt)
		for k, v := range want {
			if tags[k] != v {
				t.Errorf("template %s: %s tag %s = %q, want %q (tags %v)", params["LaunchTemplateName"], rt, k, tags[k], v, tags)
			}
		}
		if _, ok := tags[nwaws.TagNodeClaim]; ok {
			t.Errorf("template %s: %s tags name a claim: one template would serve one claim", params["LaunchTemplateName"], rt)
		}
	}
}

// templateTagSpec is tagSpec for the tags a CreateLaunchTemplate request's
// data gives its launches.
func templateTagSpec(params map[string]string, resourceType string) map[string]string {
	data := map[string]string{}
	for k, v := range params {
		if rest, ok := strings.CutPrefix(k, "LaunchTemplateData."); ok {
			data[rest] = v
		}
	}
	return tagSpec(data, resourceType)
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
