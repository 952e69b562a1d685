package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/basedeps"
)

var (
	// ErrPDBBlocked: the API server refused an eviction (429) because a
	// PodDisruptionBudget allows no more disruptions right now.
	ErrPDBBlocked = errors.New("eviction blocked by PodDisruptionBudget")
	// ErrNotFound: the object does not exist (any more). It is the only way
	// a Client method reports a missing object (or namespace): the API's
	// NotFound answer is turned into ErrNotFound, wrapped with what was being
	// done (test with errors.Is), so callers never need apierrors.IsNotFound.
	// Methods for which a missing object is already the wanted outcome
	// (DeletePod, DeleteNode, Evict) return nil instead, and NodeFor and
	// ClaimNode return a nil node.
	ErrNotFound = errors.New("not found")
)

// apiError gives an API error its context. A NotFound answer becomes
// ErrNotFound (the API status dropped), keeping the ErrNotFound contract in
// one place.
func apiError(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// PatchNodeLabels sets labels (value) and removes labels (keys in remove)
// with a JSON merge patch; other labels are untouched, so no read is needed
// and concurrent label writers (kubelet, other controllers) are not undone.
func (c *Client) PatchNodeLabels(ctx context.Context, node string, set map[string]string, remove []string) (*corev1.Node, error) {
	labels := map[string]any{}
	for k, v := range set {
		labels[k] = v
	}
	for _, k := range remove {
		if _, ok := set[k]; ok {
			return nil, fmt.Errorf("patch node %s labels: %q both set and removed", node, k)
		}
		labels[k] = nil
	}
	return c.mergePatchNode(ctx, node, map[string]any{"metadata": map[string]any{"labels": labels}}, "labels")
}

// PatchNodeAnnotations is PatchNodeLabels for annotations.
func (c *Client) PatchNodeAnnotations(ctx context.Context, node string, set map[string]string, remove []string) (*corev1.Node, error) {
	ann := map[string]any{}
	for k, v := range set {
		ann[k] = v
	}
	for _, k := range remove {
		ann[k] = nil
	}
	return c.mergePatchNode(ctx, node, map[string]any{"metadata": map[string]any{"annotations": ann}}, "annotations")
}

// Cordon marks a node unschedulable (idempotent).
func (c *Client) Cordon(ctx context.Context, node string) (*corev1.Node, error) {
	return c.mergePatchNode(ctx, node, map[string]any{"spec": map[string]any{"unschedulable": true}}, "cordon")
}

// Uncordon marks a node schedulable again (idempotent).
func (c *Client) Uncordon(ctx context.Context, node string) (*corev1.Node, error) {
	return c.mergePatchNode(ctx, node, map[string]any{"spec": map[string]any{"unschedulable": nil}}, "uncordon")
}

func (c *Client) mergePatchNode(ctx context.Context, node string, patch map[string]any, what string) (*corev1.Node, error) {
	return c.patchNode(ctx, node, types.MergePatchType, patch, what)
}

// patchNode sends one patch of the given type; what names the change in
// errors ("cordon", "labels", ...).
func (c *Client) patchNode(ctx context.Context, node string, pt types.PatchType, patch map[string]any, what string) (*corev1.Node, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("%s node %s: %w", what, node, err)
	}
	n, err := c.cs.CoreV1().Nodes().Patch(ctx, node, pt, body, metav1.PatchOptions{FieldManager: Component})
	if err != nil {
		return nil, apiError(err, "%s node %s", what, node)
	}
	return n, nil
}

// UpdateNodeTaints applies mutate to the node's taints and writes them back
// with the node's resourceVersion, so a concurrent taint change (the node
// lifecycle controller's, the kubelet's) is never lost: on conflict the node
// is re-read and mutate re-applied. mutate returns false when nothing needs
// to change, and then nothing is written.
func (c *Client) UpdateNodeTaints(ctx context.Context, node string, mutate func([]corev1.Taint) ([]corev1.Taint, bool)) (*corev1.Node, error) {
	for attempt := 0; ; attempt++ {
		n, err := c.cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return nil, apiError(err, "taint node %s", node)
		}
		taints, changed := mutate(append([]corev1.Taint(nil), n.Spec.Taints...))
		if !changed {
			return n, nil
		}
		if taints == nil {
			taints = []corev1.Taint{} // merge patch: [] clears, null would too but be explicit
		}
		body, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": n.ResourceVersion},
			"spec":     map[string]any{"taints": taints},
		})
		if err != nil {
			return nil, fmt.Errorf("taint node %s: %w", node, err)
		}
		out, err := c.cs.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{FieldManager: Component})
		if apierrors.IsConflict(err) && attempt < 5 {
			continue
		}
		if err != nil {
			return nil, apiError(err, "taint node %s", node)
		}
		return out, nil
	}
}

// AddTaint adds (or replaces, matching key and effect) a taint.
func (c *Client) AddTaint(ctx context.Context, node string, t corev1.Taint) (*corev1.Node, error) {
	return c.UpdateNodeTaints(ctx, node, func(ts []corev1.Taint) ([]corev1.Taint, bool) {
		for i := range ts {
			if ts[i].Key == t.Key && ts[i].Effect == t.Effect {
				if ts[i].Value == t.Value {
					return ts, false
				}
				ts[i] = t
				return ts, true
			}
		}
		return append(ts, t), true
	})
}

// RemoveTaints removes every taint with the given key (any effect when
// effect is "").
func (c *Client) RemoveTaints(ctx context.Context, node, key string, effect corev1.TaintEffect) (*corev1.Node, error) {
	return c.UpdateNodeTaints(ctx, node, func(ts []corev1.Taint) ([]corev1.Taint, bool) {
		out := ts[:0]
		for _, t := range ts {
			if t.Key == key && (effect == "" || t.Effect == effect) {
				continue
			}
			out = append(out, t)
		}
		return out, len(out) != len(ts)
	})
}

// EvictOptions tune one eviction.
type EvictOptions struct {
	// GracePeriodSeconds overrides the pod's terminationGracePeriodSeconds.
	GracePeriodSeconds *int64
	// Attempts bounds retries of 5xx answers and timeouts (default 4).
	Attempts int
	// AttemptTimeout bounds one request (default 10 s).
	AttemptTimeout time.Duration
}

// Evict asks the API server to evict a pod through the policy/v1 Eviction
// subresource, which enforces PodDisruptionBudgets. It never waits out a
// PDB: a 429 returns ErrPDBBlocked at once (client-go's own request retry,
// which honours Retry-After up to 10 times, is disabled), and the caller
// requeues. 5xx answers and timeouts are retried with backoff. A pod that is
// already gone counts as evicted (nil). The UID precondition makes sure a
// recreated pod of the same name is not evicted by mistake.
func (c *Client) Evict(ctx context.Context, pod *corev1.Pod, o EvictOptions) error {
	if o.Attempts <= 0 {
		o.Attempts = 4
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = 10 * time.Second
	}
	ev := &policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{
			GracePeriodSeconds: o.GracePeriodSeconds,
		},
	}
	if pod.UID != "" {
		ev.DeleteOptions.Preconditions = &metav1.Preconditions{UID: &pod.UID}
	}
	var lastErr error
	for attempt := 0; attempt < o.Attempts; attempt++ {
		if attempt > 0 {
			if err := sleepBackoff(ctx, attempt); err != nil {
				return fmt.Errorf("evict pod %s/%s: %w (last error: %w)", pod.Namespace, pod.Name, err, lastErr)
			}
		}
		actx, cancel := context.WithTimeout(ctx, o.AttemptTimeout)
		err := c.postEviction(actx, ev)
		cancel()
		switch {
		case err == nil:
			return nil
		case apierrors.IsTooManyRequests(err):
			return fmt.Errorf("evict pod %s/%s: %w: %v", pod.Namespace, pod.Name, ErrPDBBlocked, apiMessage(err))
		case apierrors.IsNotFound(err):
			return nil
		case apierrors.IsConflict(err):
			// UID precondition failed: the pod we meant is gone, replaced by
			// a namesake that is not ours to evict.
			return nil
		case retriable(err) && ctx.Err() == nil:
			lastErr = err
			continue
		default:
			return fmt.Errorf("evict pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return fmt.Errorf("evict pod %s/%s: gave up after %d attempts: %w", pod.Namespace, pod.Name, o.Attempts, lastErr)
}

// postEviction sends one eviction request with client-go's retries off.
// Clientsets without a REST client (client-go's fake, in other packages'
// unit tests) get the typed call, which has no retries to turn off.
func (c *Client) postEviction(ctx context.Context, ev *policyv1.Eviction) error {
	rc := c.cs.PolicyV1().RESTClient()
	if r, ok := rc.(*rest.RESTClient); rc == nil || (ok && r == nil) {
		return c.cs.PolicyV1().Evictions(ev.Namespace).Evict(ctx, ev)
	}
	return rc.Post().
		AbsPath("/api/v1").Namespace(ev.Namespace).Resource("pods").Name(ev.Name).SubResource("eviction").
		MaxRetries(0).Body(ev).Do(ctx).Error()
}

func apiMessage(err error) string {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Message
	}
	return err.Error()
}

// retriable: server-side failures and timeouts that a retry may cure.
func retriable(err error) bool {
	if apierrors.IsInternalError(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return st.Status().Code >= http.StatusInternalServerError
	}
	// Transport errors (connection reset, refused) carry no status.
	return !errors.Is(err, context.Canceled)
}

func sleepBackoff(ctx context.Context, attempt int) error {
	ceil := 100 * time.Millisecond << min(attempt, 5)
	return basedeps.Sleep(ctx, ceil/2+time.Duration(rand.Int64N(int64(ceil/2))))
}

// DeletePod deletes a pod (the forced step after terminationGracePeriod, or
// a pod on a node that is gone). gracePeriodSeconds nil keeps the pod's own;
// 0 deletes at once. A missing pod is not an error.
func (c *Client) DeletePod(ctx context.Context, pod *corev1.Pod, gracePeriodSeconds *int64) error {
	opts := metav1.DeleteOptions{GracePeriodSeconds: gracePeriodSeconds}
	if pod.UID != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &pod.UID}
	}
	err := c.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if err == nil || apierrors.IsNotFound(err) || (apierrors.IsConflict(err) && pod.UID != "") {
		return nil
	}
	return fmt.Errorf("delete pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

// DeleteNode deletes a Node object. uid, when set, guards against deleting
// a node that was re-registered under the same name. A missing node is not
// an error.
func (c *Client) DeleteNode(ctx context.Context, name string, uid types.UID) error {
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	err := c.cs.CoreV1().Nodes().Delete(ctx, name, opts)
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return fmt.Errorf("delete node %s: %w", name, err)
}

// NodeFor finds the Node backing a NodeClaim: the Node named nodeName when
// the claim recorded one and its providerID does not contradict the claim's,
// else the Node carrying providerID among those matching labelSelector (a
// node that registered but was never recorded, or one re-registered under
// another name). It returns nil and no error when there is none, so callers
// can tell "no node (yet/any more)" from a failed read.
func (c *Client) NodeFor(ctx context.Context, nodeName, providerID, labelSelector string) (*corev1.Node, error) {
	nodes := c.cs.CoreV1().Nodes()
	if nodeName != "" {
		n, err := nodes.Get(ctx, nodeName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get node %s: %w", nodeName, err)
		case providerID == "" || n.Spec.ProviderID == "" || n.Spec.ProviderID == providerID:
			return n, nil
		}
	}
	if providerID == "" {
		return nil, nil
	}
	list, err := nodes.List(ctx, metav1.ListOptions{LabelSelector: labelSelector})
	if err != nil {
		return nil, apiError(err, "list nodes %q", labelSelector)
	}
	for i := range list.Items {
		if list.Items[i].Spec.ProviderID == providerID {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}
