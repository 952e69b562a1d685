package kube

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// wantErrNotFound checks the ErrNotFound contract: a missing object is
// reported as ErrNotFound, never as an API NotFound a caller must also test.
func wantErrNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrNotFound) {
		t.Errorf("%s: want ErrNotFound, got %v", what, err)
	}
	if apierrors.IsNotFound(err) {
		t.Errorf("%s: error still satisfies apierrors.IsNotFound: %v", what, err)
	}
}

func TestMissingNodeIsErrNotFound(t *testing.T) {
	ctx := context.Background()
	c := NewClientFromClientset(fake.NewClientset(), nil)
	taint := corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule}
	_, err := c.Cordon(ctx, "gone")
	wantErrNotFound(t, "Cordon", err)
	_, err = c.Uncordon(ctx, "gone")
	wantErrNotFound(t, "Uncordon", err)
	_, err = c.PatchNodeLabels(ctx, "gone", map[string]string{"a": "b"}, nil)
	wantErrNotFound(t, "PatchNodeLabels", err)
	_, err = c.PatchNodeAnnotations(ctx, "gone", map[string]string{"a": "b"}, nil)
	wantErrNotFound(t, "PatchNodeAnnotations", err)
	_, err = c.AddTaint(ctx, "gone", taint)
	wantErrNotFound(t, "AddTaint", err)
	_, err = c.RemoveTaints(ctx, "gone", "k", "")
	wantErrNotFound(t, "RemoveTaints", err)
	if err := c.DeleteNode(ctx, "gone", ""); err != nil {
		t.Errorf("DeleteNode of a missing node: %v", err)
	}
	if n, err := c.NodeFor(ctx, "gone", "aws:///zone/i-1", ""); n != nil || err != nil {
		t.Errorf("NodeFor a missing node = %v, %v; want nil, nil", n, err)
	}
}

// A node deleted between the read and the write of its taints.
func TestNodeGoneBeforeTaintWriteIsErrNotFound(t *testing.T) {
	cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "nodes"}, "n")
	})
	_, err := NewClientFromClientset(cs, nil).AddTaint(context.Background(), "n", corev1.Taint{Key: "k", Effect: corev1.TaintEffectNoSchedule})
	wantErrNotFound(t, "AddTaint", err)
}

func TestMissingPodIsNotAnError(t *testing.T) {
	ctx := context.Background()
	c := NewClientFromClientset(fake.NewClientset(), nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "default"}}
	if err := c.DeletePod(ctx, pod, nil); err != nil {
		t.Errorf("DeletePod of a missing pod: %v", err)
	}
	if err := c.Evict(ctx, pod, EvictOptions{}); err != nil {
		t.Errorf("Evict of a missing pod: %v", err)
	}
}

// Events in a namespace that does not exist (any more) answer NotFound.
func TestEventInMissingNamespaceIsErrNotFound(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "events", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "gone")
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "gone"}}
	err := NewClientFromClientset(cs, nil).PodEvent(context.Background(), pod, EventNormal, "R", "m")
	wantErrNotFound(t, "PodEvent", err)
}
