package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PVCVolumeName returns the PersistentVolume a PersistentVolumeClaim is
// bound to ("" while unbound). A missing claim gives an error wrapping
// ErrNotFound.
func (c *Client) PVCVolumeName(ctx context.Context, namespace, name string) (string, error) {
	pvc, err := c.cs.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("get pvc %s/%s: %w", namespace, name, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("get pvc %s/%s: %w", namespace, name, err)
	}
	return pvc.Spec.VolumeName, nil
}
