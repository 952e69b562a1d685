package lifecycle_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
)

// Liveness: a claim never launched is deleted after 5 minutes; a launched
// claim whose node never registers is deleted after 15 minutes and its
// instance terminated.
func TestLiveness(t *testing.T) {
	e := newEnv(t)
	c := e.newController(e.deps())
	// Never launched.
	never := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "live-unlaunched", CreationTimestamp: metav1.NewTime(e.clock.Now()),
		Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	if err := e.st.CreateNodeClaim(e.ctx, never); err != nil {
		t.Fatal(err)
	}
	// Launched, but its kubelet never registers.
	id := e.rawInstance(fmt.Sprintf("live-unregistered-%d", e.id))
	inst, err := e.p.GetInstance(e.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	unreg := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("live-unregistered-%d", e.id), CreationTimestamp: metav1.NewTime(e.clock.Now()),
		Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	inst.Record(unreg, metav1.NewTime(e.clock.Now()))
	if err := e.st.CreateNodeClaim(e.ctx, unreg); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{never.Name, unreg.Name} {
		out, err := c.Reconcile(e.ctx, name)
		if err != nil || out.Action != lifecycle.ActionWaiting || out.RequeueAfter <= 0 {
			t.Fatalf("%s before its timeout: %+v %v", name, out, err)
		}
	}
	e.clock.Advance(5*time.Minute + time.Second)
	out, err := c.Reconcile(e.ctx, never.Name)
	if err != nil || !out.Done || out.Action != lifecycle.ActionLiveness {
		t.Fatalf("unlaunched claim after 5 min: %+v %v", out, err)
	}
	if out, err := c.Reconcile(e.ctx, unreg.Name); err != nil || out.Done {
		t.Fatalf("unregistered claim deleted before 15 min: %+v %v", out, err)
	}
	if e.terminateCalls(id) != 0 {
		t.Fatal("instance terminated before the registration TTL")
	}
	e.clock.Advance(10 * time.Minute)
	out, err = c.Reconcile(e.ctx, unreg.Name)
	if err != nil || !out.Done || out.Action != lifecycle.ActionLiveness {
		t.Fatalf("unregistered claim after 15 min: %+v %v", out, err)
	}
	if e.terminateCalls(id) != 1 {
		t.Errorf("instance %s not terminated", id)
	}
	ts, err := e.st.GetTombstone(e.ctx, unreg.Name)
	if err != nil || ts.Claim.DeletionReason() != lifecycle.ReasonRegistrationTimeout {
		t.Errorf("tombstone: %+v %v", ts, err)
	}
}

// rawInstance launches an instance this cluster owns (ownership tag, a
// claim tag) whose kubelet never registers: its launch template has no
// user data.
func (e *env) rawInstance(claimTag string) string {
	e.t.Helper()
	param, err := ssm.NewFromConfig(mustCfg(e)).GetParameter(e.ctx, &ssm.GetParameterInput{
		Name: sdkaws.String("/aws/service/eks/optimized-ami/" + e.k8sMinor() + "/amazon-linux-2023/x86_64/standard/recommended/image_id"),
	})
	if err != nil {
		e.t.Fatalf("AMI parameter: %v", err)
	}
	lt := fmt.Sprintf("raw-%d", time.Now().UnixNano())
	if _, err := e.ec2.CreateLaunchTemplate(e.ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: &lt,
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: param.Parameter.Value,
			UserData: sdkaws.String(base64.StdEncoding.EncodeToString([]byte("#!/bin/bash\n/etc/eks/bootstrap.sh " + e.cloud.ClusterName + " --kubelet-extra-args '--node-labels=broken'\n")))},
	}); err != nil {
		e.t.Fatal(err)
	}
	tags := []ec2types.Tag{
		{Key: sdkaws.String(nwaws.ClusterTagKey(e.cloud.ClusterName)), Value: sdkaws.String("owned")},
		{Key: sdkaws.String(nwaws.TagManagedBy), Value: sdkaws.String(nwaws.ManagedBy)},
		{Key: sdkaws.String(nwaws.TagOwner), Value: sdkaws.String(e.owner)},
		{Key: sdkaws.String(nwaws.TagNodePool), Value: sdkaws.String("default")},
		{Key: sdkaws.String(nwaws.TagNodeClaim), Value: sdkaws.String(claimTag)},
	}
	id := cloudtest.RawInstance{LaunchTemplate: lt, InstanceType: ec2types.InstanceTypeM5Large, Zone: e.cloud.Region + "a", Tags: tags}.Launch(e.ctx, e.t, e.ec2)
	e.t.Cleanup(func() { _ = e.p.Terminate(context.Background(), id) })
	// Its kubelet fails on the broken bootstrap: no Node ever appears.
	err = wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
		for _, ev := range e.cloud.AWS.KubeletEvents() {
			if ev.InstanceID == id && ev.Action == "failed" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("kubelet of %s did not fail to register: %v", id, err)
	}
	return id
}

// Expiration is forceful: past expireAfter the claim is replaced whatever
// its budget says.
func TestExpiration(t *testing.T) {
	e := newEnv(t, withBudget("0"))
	c := e.newController(e.deps())
	cl, _ := e.initializedClaim(c, "expire-a")
	e.clock.Advance(720*time.Hour + time.Second)
	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Action != lifecycle.ActionExpired {
		t.Fatalf("expired claim: %+v %v", out, err)
	}
	e.reconcileUntil(c, cl.Name, "terminated", func(o lifecycle.Outcome, cl *apis.NodeClaim) bool { return cl == nil })
	ts, err := e.st.GetTombstone(e.ctx, cl.Name)
	if err != nil || ts.Claim.DeletionReason() != apis.DeletionReasonExpired {
		t.Fatalf("tombstone %+v %v", ts, err)
	}
}

// A claim in a capacity block is drained and terminated 40 minutes before
// the block ends (EC2 starts reclaiming 30 minutes before; Karpenter drains
// 10 minutes ahead of that), as an interruption.
func TestCapacityBlockIsDrainedBeforeItEnds(t *testing.T) {
	e := newEnv(t)
	c := e.newController(e.deps())
	cl := e.launchClaim("block")
	end := e.clock.Now().Add(50 * time.Minute).UTC().Format(time.RFC3339)
	if _, err := e.st.MutateNodeClaim(e.ctx, cl.Name, func(x *apis.NodeClaim) error {
		x.Labels[apis.CapacityTypeLabelKey] = apis.CapacityTypeReserved
		x.Labels[apis.CapacityReservationIDLabelKey] = "cr-0123456789abcdef0"
		x.Labels[apis.CapacityReservationTypeLabelKey] = "capacity-block"
		x.Annotations[nwaws.AnnotationCapacityBlockEnd] = end
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Reconcile(e.ctx, cl.Name); err != nil || out.Action == lifecycle.ActionCapacityBlockEnding {
		t.Fatalf("50 min before the end: %+v %v", out, err)
	}
	e.clock.Advance(11 * time.Minute)
	out, err := c.Reconcile(e.ctx, cl.Name)
	if err != nil || out.Action != lifecycle.ActionCapacityBlockEnding {
		t.Fatalf("39 min before the end: %+v %v", out, err)
	}
	// No Node to drain here, so the termination finishes at once.
	reason := ""
	if cur, err := e.st.GetNodeClaim(e.ctx, cl.Name); err == nil && cur.Deleting() {
		reason = cur.DeletionReason()
	} else if ts, err := e.st.GetTombstone(e.ctx, cl.Name); err == nil {
		reason = ts.Claim.DeletionReason()
	}
	if reason != apis.DeletionReasonInterrupted {
		t.Fatalf("claim deleted with reason %q, want %s", reason, apis.DeletionReasonInterrupted)
	}
}
