package main

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud/kubeplane"
)

// releasesFinalizers: on Delete, the termination finalizer leaves the
// Nodes the stack's claims name (by providerID or node name), stays on
// another autoscaler's Node, and a second Delete changes nothing.
func releasesFinalizers(t *testing.T, ctx context.Context, r *registrar, plane *kubeplane.Plane, cluster string) {
	const keep = "example.com/keep"
	nodes := plane.Client().CoreV1().Nodes()
	for name, providerID := range map[string]string{
		"ours-by-id": "aws:///us-west-2a/i-0000000000000001", "ours-by-name": "", "karpenters": "aws:///us-west-2a/i-0000000000000009",
	} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Finalizers: []string{apis.TerminationFinalizer, keep}}, Spec: corev1.NodeSpec{ProviderID: providerID}}
		if _, err := nodes.Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { // let the plane's etcd hold nothing half-deleted
		for _, name := range []string{"ours-by-id", "ours-by-name", "karpenters"} {
			_, _ = nodes.Patch(ctx, name, "application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		}
	}()
	byID, byName := &apis.NodeClaim{}, &apis.NodeClaim{}
	byID.Status.ProviderID = "aws:///us-west-2a/i-0000000000000001"
	byName.Status.NodeName = "ours-by-name"
	p := map[string]interface{}{propClusterName: cluster, propAccessName: "nodewright-controller-finalizers", propTableName: "claims"}
	del := cfn.Event{ResourceType: accessResourceType, RequestType: cfn.RequestDelete, PhysicalResourceID: "nodewright-controller-finalizers", ResourceProperties: p}

	r.claims = func(context.Context, string) ([]*apis.NodeClaim, error) { return nil, errors.New("table unreachable") }
	if _, _, err := r.handle(ctx, del); err != nil {
		t.Fatalf("a failed release must not fail the delete: %v", err)
	}
	r.claims = func(_ context.Context, table string) ([]*apis.NodeClaim, error) {
		if table != "claims" {
			t.Errorf("table = %q", table)
		}
		return []*apis.NodeClaim{byID, byName}, nil
	}
	defer func() { r.claims = nil }()
	want := map[string][]string{"ours-by-id": {keep}, "ours-by-name": {keep}, "karpenters": {apis.TerminationFinalizer, keep}}
	for attempt := range 2 { // CloudFormation may retry a Delete
		if _, _, err := r.handle(ctx, del); err != nil {
			t.Fatalf("delete %d: %v", attempt, err)
		}
		for name, fins := range want {
			n, err := nodes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(n.Finalizers, fins) {
				t.Errorf("delete %d: node %s finalizers = %v, want %v", attempt, name, n.Finalizers, fins)
			}
		}
	}
}
