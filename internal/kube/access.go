package kube

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
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
	return applyAccess(ctx, cs, access.ControllerClusterRole(name), access.ControllerClusterRoleBinding(name))
}

// ApplyShadowAccess is ApplyControllerAccess for a shadow-mode stack: the
// read-only access.ShadowClusterRole bound to access.ShadowGroup.
func ApplyShadowAccess(ctx context.Context, cs kubernetes.Interface, name string) error {
	return applyAccess(ctx, cs, access.ShadowClusterRole(name), access.ShadowClusterRoleBinding(name))
}

// applyAccess creates or updates want and its binding wantB.
func applyAccess(ctx context.Context, cs kubernetes.Interface, want *rbacv1.ClusterRole, wantB *rbacv1.ClusterRoleBinding) error {
	roles := cs.RbacV1().ClusterRoles()
	err := createOrUpdate("ClusterRole "+want.Name,
		func() error { _, err := roles.Create(ctx, want, metav1.CreateOptions{}); return err },
		func() error {
			cur, err := getManaged(ctx, roles.Get, "ClusterRole", want.Name)
			if err != nil {
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
	return createOrUpdate("ClusterRoleBinding "+wantB.Name,
		func() error { _, err := bindings.Create(ctx, wantB, metav1.CreateOptions{}); return err },
		func() error {
			cur, err := getManaged(ctx, bindings.Get, "ClusterRoleBinding", wantB.Name)
			if err != nil {
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
// name if nodewright manages them, the controllers' or shadow mode's;
// missing ones are fine.
func RemoveControllerAccess(ctx context.Context, cs kubernetes.Interface, name string) error {
	bindings := cs.RbacV1().ClusterRoleBindings()
	if err := removeManaged(ctx, bindings.Get, bindings.Delete, "ClusterRoleBinding", name); err != nil {
		return err
	}
	roles := cs.RbacV1().ClusterRoles()
	return removeManaged(ctx, roles.Get, roles.Delete, "ClusterRole", name)
}

// getManaged reads the object called name and fails unless nodewright
// manages it.
func getManaged[T metav1.Object](ctx context.Context, get func(context.Context, string, metav1.GetOptions) (T, error), kind, name string) (T, error) {
	cur, err := get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return cur, err
	}
	return cur, ownedByUs(cur.GetLabels(), kind, cur.GetName())
}

// removeManaged deletes the object called name if it exists and nodewright
// manages it; a missing object is fine, one managed by others is left alone.
func removeManaged[T metav1.Object](ctx context.Context, get func(context.Context, string, metav1.GetOptions) (T, error),
	del func(context.Context, string, metav1.DeleteOptions) error, kind, name string) error {
	cur, err := get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("kube: get %s %s: %w", kind, name, err)
	case ownedByUs(cur.GetLabels(), kind, name) == nil:
		if err := del(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("kube: delete %s %s: %w", kind, name, err)
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
