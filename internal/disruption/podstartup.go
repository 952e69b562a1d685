package disruption

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/state"
	"github.com/nodewright/nodewright/internal/store"
)

// PodStartupKey holds the time up to which pod startups were reported.
const PodStartupKey = "disruption/pod-startup"

// podStartupTTL lets the watermark lapse when the function stops running
// for long (the next pass then starts a fresh window instead of reporting
// every pod that became ready in between as one burst).
const podStartupTTL = time.Hour

// podStartup reports Karpenter's pod startup duration: creation to Ready,
// for the pods that became Ready since the last reported pass. nodewright
// holds no watch, so the window is the time between two passes, kept in
// the store; a pass that cannot move the window (another writer, an error)
// reports nothing rather than twice. The watermark is written before the
// values are recorded, so a crash loses a window's values, never repeats
// them. The view may be a cached one: a pod whose readiness changed has a
// changed row, so it was read anew.
func (c *Controller) podStartup(ctx context.Context, cl *state.Cluster) {
	now := c.d.Now()
	from, version, err := c.podStartupWindow(ctx)
	if err == nil {
		_, err = c.d.Store.PutKV(ctx, PodStartupKey, []byte(now.UTC().Format(time.RFC3339Nano)), version, podStartupTTL)
	}
	if err != nil {
		c.log.DebugContext(ctx, "pod startup window not moved; nothing reported", "error", err.Error())
		return
	}
	if from.IsZero() {
		return
	}
	for _, n := range cl.Nodes {
		for _, p := range n.Pods {
			if d, ok := startupDuration(p, from, now); ok {
				c.d.Metrics.Observe(metrics.PodStartupDuration, metrics.Seconds, d.Seconds(), nil)
			}
		}
	}
}

// podStartupWindow returns where this pass's window starts (zero on the
// first pass) and the watermark's version.
func (c *Controller) podStartupWindow(ctx context.Context) (time.Time, int64, error) {
	kv, err := c.d.Store.GetKV(ctx, PodStartupKey)
	if errors.Is(err, store.ErrNotFound) {
		return time.Time{}, 0, nil
	}
	if err != nil {
		return time.Time{}, 0, err
	}
	from, perr := time.Parse(time.RFC3339Nano, string(kv.Value))
	if perr != nil {
		// Unreadable: start a fresh window over it.
		return time.Time{}, kv.Version, nil
	}
	return from, kv.Version, nil
}

// startupDuration is the time from a pod's creation to its Ready
// condition, when that condition turned True in (from, to] on the pod's
// first start: a container that restarted makes Ready flip again, which
// is not a startup.
func startupDuration(p *corev1.Pod, from, to time.Time) (time.Duration, bool) {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.RestartCount > 0 {
			return 0, false
		}
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type != corev1.PodReady || cond.Status != corev1.ConditionTrue {
			continue
		}
		at := cond.LastTransitionTime.Time
		if !at.After(from) || at.After(to) || at.Before(p.CreationTimestamp.Time) {
			return 0, false
		}
		return at.Sub(p.CreationTimestamp.Time), true
	}
	return 0, false
}
