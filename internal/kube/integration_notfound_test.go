package kube_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/kube"
)

// The ErrNotFound contract against the real API server: every Client method
// that can miss reports a missing object as kube.ErrNotFound (and never as
// an API NotFound), or treats it as done.
func TestMissingObjectsAgainstAPIServer(t *testing.T) {
	ctx, c, _, ns := setup(t)
	const node = "no-such-node"
	wantErrNotFound := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, kube.ErrNotFound) || apierrors.IsNotFound(err) {
			t.Errorf("%s: want only kube.ErrNotFound, got %v (apierrors.IsNotFound=%v)", what, err, apierrors.IsNotFound(err))
		}
	}
	_, err := c.Cordon(ctx, node)
	wantErrNotFound("Cordon", err)
	_, err = c.Uncordon(ctx, node)
	wantErrNotFound("Uncordon", err)
	_, err = c.PatchNodeLabels(ctx, node, map[string]string{"a": "b"}, nil)
	wantErrNotFound("PatchNodeLabels", err)
	_, err = c.PatchNodeAnnotations(ctx, node, map[string]string{"a": "b"}, nil)
	wantErrNotFound("PatchNodeAnnotations", err)
	_, err = c.AddTaint(ctx, node, corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule})
	wantErrNotFound("AddTaint", err)
	_, err = c.RemoveTaints(ctx, node, "k", "")
	wantErrNotFound("RemoveTaints", err)
	err = c.Event(ctx, corev1.ObjectReference{Kind: "Pod", Namespace: "no-such-namespace", Name: "p"}, kube.EventNormal, "R", "m")
	wantErrNotFound("Event in a missing namespace", err)

	// Missing is the wanted outcome of these.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "no-such-pod", Namespace: ns}}
	if err := c.DeletePod(ctx, pod, nil); err != nil {
		t.Errorf("DeletePod: %v", err)
	}
	if err := c.Evict(ctx, pod, kube.EvictOptions{}); err != nil {
		t.Errorf("Evict: %v", err)
	}
	if err := c.DeleteNode(ctx, node, ""); err != nil {
		t.Errorf("DeleteNode: %v", err)
	}
	claim := &apis.NodeClaim{Status: apis.NodeClaimStatus{NodeName: node, ProviderID: "aws:///us-west-2a/i-0"}}
	if n, err := c.ClaimNode(ctx, claim); n != nil || err != nil {
		t.Errorf("ClaimNode = %v, %v; want nil, nil", n, err)
	}
}
