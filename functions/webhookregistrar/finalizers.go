package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/store"
)

// propTableName is the stack's NodeClaim table: its claims say which Nodes
// are nodewright's. A property of Custom::NodewrightAccess, whose name
// never changes, so its Delete means the stack (or its controllers) went;
// the webhook's configuration can be replaced while the stack lives on.
// Stacks from before it was set have no such property, and their Delete
// leaves finalizers alone.
const propTableName = "TableName"

// claimLister lists the live claims in a stack's table.
type claimLister func(ctx context.Context, table string) ([]*apis.NodeClaim, error)

// storeClaims reads claims with the project's store (dynamodb:Query only).
func storeClaims(api store.API) claimLister {
	return func(ctx context.Context, table string) ([]*apis.NodeClaim, error) {
		s, err := store.New(api, table)
		if err != nil {
			return nil, err
		}
		return s.ListNodeClaims(ctx)
	}
}

// releaseFinalizers takes Karpenter's termination finalizer off this
// stack's Nodes when the stack goes: with the lifecycle function gone,
// nothing else would, and a Node deleted later would hang. Only Nodes a
// claim in the stack's table names (by providerID or node name) are
// touched; another autoscaler's Node keeps its finalizer. Best effort: a
// failure is logged and never blocks the stack's deletion.
func (r *registrar) releaseFinalizers(ctx context.Context, log *slog.Logger, clusterName, table string) {
	if r.claims == nil || table == "" {
		return
	}
	released, err := r.tryReleaseFinalizers(ctx, clusterName, table)
	if err != nil {
		log.Error("release node finalizers; Nodes deleted later may need theirs removed by hand", "error", err, "finalizer", apis.TerminationFinalizer)
		return
	}
	log.Info("node finalizers released", "nodes", released)
}

func (r *registrar) tryReleaseFinalizers(ctx context.Context, clusterName, table string) ([]string, error) {
	claims, err := r.claims(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("list claims in %s: %w", table, err)
	}
	kc, found, err := r.cluster(ctx, clusterName)
	if err != nil || !found {
		return nil, err
	}
	return releaseOwned(ctx, kc, claims)
}

// releaseOwned removes the finalizer from the Nodes claims name. Re-running
// it is a no-op: Nodes without the finalizer are skipped.
func releaseOwned(ctx context.Context, kc kubernetes.Interface, claims []*apis.NodeClaim) ([]string, error) {
	ids, names := map[string]bool{}, map[string]bool{}
	for _, c := range claims {
		if c.Status.ProviderID != "" {
			ids[c.Status.ProviderID] = true
		}
		if c.Status.NodeName != "" {
			names[c.Status.NodeName] = true
		}
	}
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	var released []string
	var errs []error
	for i := range nodes.Items {
		n := &nodes.Items[i]
		// Neither map holds "": a Node without a providerID matches by name only.
		if !slices.Contains(n.Finalizers, apis.TerminationFinalizer) || (!ids[n.Spec.ProviderID] && !names[n.Name]) {
			continue
		}
		if err := removeFinalizer(ctx, kc, n); err != nil {
			errs = append(errs, err)
			continue
		}
		released = append(released, n.Name)
	}
	return released, errors.Join(errs...)
}

// removeFinalizer prunes only the termination finalizer (a strategic merge
// patch deletes that item on the server, keeping any other finalizer).
func removeFinalizer(ctx context.Context, kc kubernetes.Interface, n *corev1.Node) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"$deleteFromPrimitiveList/finalizers": []string{apis.TerminationFinalizer}}})
	if err != nil {
		return err
	}
	_, err = kc.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "nodewright-webhookregistrar"})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer from node %s: %w", n.Name, err)
	}
	return nil
}
