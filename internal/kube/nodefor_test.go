package kube

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func nodeWith(name, providerID string, labels map[string]string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.NodeSpec{ProviderID: providerID},
	}
}

func TestNodeFor(t *testing.T) {
	poolA := map[string]string{"karpenter.sh/nodepool": "a"}
	poolB := map[string]string{"karpenter.sh/nodepool": "b"}
	c := NewClientFromClientset(fake.NewClientset(
		nodeWith("named", "aws:///us-east-1a/i-1", poolA),
		nodeWith("unrecorded", "aws:///us-east-1a/i-2", poolA),
		nodeWith("reused-name", "aws:///us-east-1a/i-9", poolA),
		nodeWith("no-pid", "", poolA),
		nodeWith("other-pool", "aws:///us-east-1a/i-3", poolB),
	), nil)
	sel := "karpenter.sh/nodepool=a"
	for _, tc := range []struct {
		name, nodeName, providerID, selector, want string
	}{
		{"by name", "named", "aws:///us-east-1a/i-1", sel, "named"},
		{"by name, claim without providerID", "named", "", sel, "named"},
		{"by name, node without providerID yet", "no-pid", "aws:///us-east-1a/i-7", sel, "no-pid"},
		{"recorded name missing: by providerID", "gone", "aws:///us-east-1a/i-2", sel, "unrecorded"},
		{"no name recorded: by providerID", "", "aws:///us-east-1a/i-2", sel, "unrecorded"},
		{"name taken by another instance: by providerID", "reused-name", "aws:///us-east-1a/i-2", sel, "unrecorded"},
		{"name taken by another instance, no match", "reused-name", "aws:///us-east-1a/i-5", sel, ""},
		{"providerID outside the selector", "", "aws:///us-east-1a/i-3", sel, ""},
		{"empty selector searches all nodes", "", "aws:///us-east-1a/i-3", "", "other-pool"},
		{"nothing to go by", "", "", sel, ""},
		{"missing name, no providerID", "gone", "", sel, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := c.NodeFor(context.Background(), tc.nodeName, tc.providerID, tc.selector)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if n != nil {
				got = n.Name
			}
			if got != tc.want {
				t.Fatalf("NodeFor(%q, %q, %q) = %q, want %q", tc.nodeName, tc.providerID, tc.selector, got, tc.want)
			}
		})
	}
}
