package karpenter_test

import (
	"slices"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud/karpenter"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// mutating are the verbs that change an object (a taint, a cordon, a
// finalizer, a deletion are all patches, updates or deletes of the Node).
var mutating = []string{"create", "update", "patch", "delete", "deletecollection"}

// actor is who made an audited request: Karpenter, nodewright's
// controllers, or neither ("").
func actor(ev kubeplane.AuditEvent) string {
	switch {
	case ev.User == karpenter.User:
		return byKarpenter
	case strings.HasPrefix(ev.User, "nodewright-controller"):
		return byNodewright
	}
	return ""
}

// nodeOwner is who launched node: as the fleet saw it, else by name
// (Karpenter names its nodes after their NodeClaims, <nodepool>-<suffix>).
func (c *coexist) nodeOwner(node string) string {
	if by := c.f.ownerOf(node); by != "" {
		return by
	}
	if strings.HasPrefix(node, karpenterPool+"-") {
		return byKarpenter
	}
	return "unknown"
}

// checkAudit reads every request Karpenter and nodewright's controllers
// made to the API server: each may change only its own Nodes, evict only
// its own workload's pods, and nodewright never writes Karpenter's
// objects (NodeClaims, NodePools, KWOKNodeClasses).
func (c *coexist) checkAudit() {
	t := c.e.T
	t.Helper()
	events, err := c.e.Cloud.Plane.Audit()
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]int{}
	for _, ev := range events {
		who := actor(ev)
		if who == "" || !slices.Contains(mutating, ev.Verb) {
			continue
		}
		switch ev.Resource {
		case "nodes":
			if by := c.nodeOwner(ev.Name); by != who {
				t.Errorf("%s changed node %s, launched by %s: %s (%d)", who, ev.Name, by, ev, ev.Code)
				continue
			}
			own[who+" node "+ev.Verb]++
		case "pods":
			if ev.Namespace == c.e.Namespace && (ev.Subresource == "eviction" || ev.Verb == "delete") {
				if !strings.HasPrefix(ev.Name, who+"-") {
					t.Errorf("%s removed pod %s of the other's workload: %s", who, ev.Name, ev)
					continue
				}
				own[who+" pod eviction/delete"]++
			}
		case "nodeclaims", "nodepools", "kwoknodeclasses", "nodeoverlays":
			if who == byNodewright {
				t.Errorf("nodewright wrote Karpenter's %s: %s", ev.Resource, ev)
			}
		}
	}
	t.Logf("audit: %d requests; each side's writes to its own nodes and pods: %v", len(events), own)
	for _, who := range []string{byKarpenter, byNodewright} {
		if own[who+" node patch"]+own[who+" node update"]+own[who+" node delete"]+own[who+" node create"] == 0 {
			t.Errorf("the audit log shows no write of %s to its own nodes: the check saw nothing (%v)", who, own)
		}
	}
}

// checkEC2 reads the EC2 simulator's call log: every instance terminated
// or tagged is one nodewright launched (its owner tag), and the instance
// and launch template tagged as Karpenter's AWS provider tags them are
// never terminated, tagged or deleted and still run as they were.
func (c *coexist) checkEC2(other, otherLT string) {
	t := c.e.T
	t.Helper()
	sim := c.e.Cloud.AWS
	owned := func(id string) bool {
		inst, _, ok := sim.EC2().Instance(id)
		if !ok {
			return false
		}
		for _, tg := range inst.Tags {
			if sdkaws.ToString(tg.Key) == nwaws.TagOwner && sdkaws.ToString(tg.Value) == c.e.Owner() {
				return true
			}
		}
		return false
	}
	terminated := 0
	for _, call := range sim.Calls("ec2", "") {
		for k, v := range call.Params {
			switch {
			case call.Operation == "TerminateInstances" && strings.HasPrefix(k, "InstanceId."):
				terminated++
				if !owned(v) {
					t.Errorf("TerminateInstances of %s, not nodewright's", v)
				}
			case call.Operation == "CreateTags" && strings.HasPrefix(k, "ResourceId.") && v == other:
				t.Errorf("CreateTags on the Karpenter-tagged instance %s", v)
			case call.Operation == "DeleteLaunchTemplate" && v == otherLT:
				t.Errorf("DeleteLaunchTemplate of the Karpenter-tagged template %s", v)
			}
		}
	}
	inst, _, ok := sim.EC2().Instance(other)
	if !ok || inst.State == nil || inst.State.Name != "running" {
		t.Errorf("the Karpenter-tagged instance %s is no longer running: %+v", other, inst.State)
	}
	lts, err := ec2.NewFromConfig(c.e.AWS).DescribeLaunchTemplates(c.e.Ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{otherLT}})
	if err != nil || len(lts.LaunchTemplates) != 1 {
		t.Errorf("the Karpenter-tagged launch template %s is gone: %v", otherLT, err)
	}
	t.Logf("EC2: nodewright terminated %d instances, all its own; the Karpenter-tagged instance and launch template untouched", terminated)
}
