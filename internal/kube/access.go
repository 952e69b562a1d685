package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/nodewright/nodewright/internal/access"
)

// ApplyControllerAccess creates or updates the controllers' ClusterRole and
// its binding (internal/access), both called name. It refuses to overwrite
// objects of that name that nodewright does not manage.
func ApplyControllerAccess(ctx context.Context, cs kubernetes.Interface, name string) error {
	roles := cs.RbacV1().ClusterRoles()
	want := access.ControllerClusterRole(name)
	err := createOrUpdate("ClusterRole "+want.Name,
		func() error { _, err := roles.Create(ctx, want, metav1.CreateOptions{}); return err },
		func() error {
			cur, err := roles.Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := ownedByUs(cur.Labels, "ClusterRole", cur.Name); err != nil {
				return err
			}
			next := want.DeepCopy()
			next.ResourceVersion = cur.ResourceVersion
			_, err = roles.Update(ctx, next, metav1.UpdateOptions{})
			return err
		})
	if err != nil {
		return err
	}
	bindings := cs.RbacV1().ClusterRoleBindings()
	wantB := access.ControllerClusterRoleBinding(name)
	return createOrUpdate("ClusterRoleBinding "+wantB.Name,
		func() error { _, err := bindings.Create(ctx, wantB, metav1.CreateOptions{}); return err },
		func() error {
			cur, err := bindings.Get(ctx, wantB.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := ownedByUs(cur.Labels, "ClusterRoleBinding", cur.Name); err != nil {
				return err
			}
			if cur.RoleRef != wantB.RoleRef {
				// The role reference is immutable: replace the binding.
				if err := bindings.Delete(ctx, cur.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &cur.UID}}); err != nil {
					return err
				}
				_, err = bindings.Create(ctx, wantB, metav1.CreateOptions{})
				return err
			}
			next := wantB.DeepCopy()
			next.ResourceVersion = cur.ResourceVersion
			_, err = bindings.Update(ctx, next, metav1.UpdateOptions{})
			return err
		})
}

// RemoveControllerAccess deletes the binding and the ClusterRole called
// name if nodewright manages them; missing ones are fine.
func RemoveControllerAccess(ctx context.Context, cs kubernetes.Interface, name string) error {
	b, err := cs.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("kube: get ClusterRoleBinding %s: %w", name, err)
	case ownedByUs(b.Labels, "ClusterRoleBinding", name) == nil:
		if err := cs.RbacV1().ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: delete ClusterRoleBinding %s: %w", name, err)
		}
	}
	r, err := cs.RbacV1().ClusterRoles().Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("kube: get ClusterRole %s: %w", name, err)
	case ownedByUs(r.Labels, "ClusterRole", name) == nil:
		if err := cs.RbacV1().ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: delete ClusterRole %s: %w", name, err)
		}
	}
	return nil
}

// createOrUpdate creates an object, or updates it (retrying conflicts) if
// it exists.
func createOrUpdate(what string, create, update func() error) error {
	err := create()
	if err == nil {
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kube: create %s: %w", what, err)
	}
	if err := retry.RetryOnConflict(retry.DefaultRetry, update); err != nil {
		return fmt.Errorf("kube: update %s: %w", what, err)
	}
	return nil
}

func ownedByUs(labels map[string]string, kind, name string) error {
	if labels[access.ManagedByLabel] != access.ManagedByValue {
		return fmt.Errorf("a %s named %s exists and is not managed by nodewright (label %s=%s missing); refusing to change it",
			kind, name, access.ManagedByLabel, access.ManagedByValue)
	}
	return nil
}
