package termination

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/pods"
)

// stuckTerminating: a pod still terminating this long after its own
// deletion deadline has a dead kubelet; waiting for it would wait forever.
const stuckTerminating = time.Minute

// backoff is the delay before the next Step of a waiting drain: the time
// since the deletion mark, bounded to [MinRequeue, MaxRequeue]. That grows
// like Karpenter's per-pod exponential backoff (100 ms doubling to 10 s)
// without keeping a retry counter anywhere: the claim's mark is the clock.
func backoff(cl *apis.NodeClaim, now time.Time) time.Duration {
	d := now.Sub(cl.DeletionTimestamp.Time)
	return min(max(d, MinRequeue), MaxRequeue)
}

// drain does one round of the drain and reports whether it is complete.
func (t *Terminator) drain(ctx context.Context, s *stepState) (bool, error) {
	onNode, err := t.d.Cluster.PodsOnNode(ctx, s.node.Name)
	if err != nil {
		return false, err
	}
	waiting := WaitingPods(onNode, s.now)
	s.res.Waiting = len(waiting)
	if len(waiting) == 0 {
		return true, nil
	}
	if err := t.deleteExpiring(ctx, s, waiting); err != nil {
		return false, err
	}
	group := NextEvictionGroup(waiting)
	if len(group) == 0 {
		return false, nil
	}
	t.evict(ctx, s.log, group, &s.res)
	return false, nil
}

// deleteExpiring deletes, past (or near) the claim's terminationGracePeriod,
// the waiting pods that would otherwise outlive the deadline, PDBs and
// do-not-disrupt notwithstanding (Karpenter's DeleteExpiringPods).
func (t *Terminator) deleteExpiring(ctx context.Context, s *stepState, waiting []*corev1.Pod) error {
	deadline, hasDeadline := s.cl.TerminationDeadline()
	if !hasDeadline {
		return nil
	}
	for _, p := range waiting {
		grace, due := pods.ForcedDeletion(p, deadline, s.now)
		if !due {
			continue
		}
		if err := t.d.Cluster.DeletePod(ctx, p, &grace); err != nil {
			return fmt.Errorf("delete pod %s/%s after terminationGracePeriod: %w", p.Namespace, p.Name, err)
		}
		s.res.Deleted++
		s.log.InfoContext(ctx, "pod deleted: terminationGracePeriod of the nodeclaim elapsed", "pod", p.Namespace+"/"+p.Name, "grace-seconds", grace)
		t.podEvent(ctx, p, kube.EventWarning, ReasonEvicted, "Deleted pod: the NodeClaim's terminationGracePeriod elapsed")
	}
	return nil
}

// evict sends the group's evictions concurrently.
func (t *Terminator) evict(ctx context.Context, log *slog.Logger, group []*corev1.Pod, res *Result) {
	sem := make(chan struct{}, t.d.EvictConcurrency)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, p := range group {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := t.d.Cluster.Evict(ctx, p, kube.EvictOptions{})
			code := "200"
			mu.Lock()
			switch {
			case err == nil:
				res.Evicted++
			case errors.Is(err, kube.ErrPDBBlocked):
				res.Blocked++
				code = "429"
			default:
				code = "error"
			}
			mu.Unlock()
			t.metric(metrics.EvictionRequests, metrics.Dimensions{"code": code})
			pod := p.Namespace + "/" + p.Name
			switch {
			case err == nil:
				log.InfoContext(ctx, "pod evicted", "pod", pod)
				t.podEvent(ctx, p, kube.EventNormal, ReasonEvicted, "Evicted pod: its node is being terminated")
			case errors.Is(err, kube.ErrPDBBlocked):
				log.InfoContext(ctx, "eviction blocked by PodDisruptionBudget", "pod", pod, "error", err)
			default:
				log.WarnContext(ctx, "eviction failed", "pod", pod, "error", err)
			}
		})
	}
	wg.Wait()
}

// WaitingPods are the pods on a draining node that the drain waits for
// (Karpenter's rules): not terminal, not mirror/static pods, not pods that
// tolerate karpenter.sh/disrupted:NoSchedule (they would come straight back,
// and die with the node), and not pods stuck terminating (a dead kubelet
// never confirms them). Pods already terminating are still waited for.
func WaitingPods(all []*corev1.Pod, now time.Time) []*corev1.Pod {
	var out []*corev1.Pod
	for _, p := range all {
		switch {
		case p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed:
		case pods.IsMirrorOrStatic(p):
		case pods.ToleratesDisrupted(p):
		case p.DeletionTimestamp != nil && now.After(p.DeletionTimestamp.Add(stuckTerminating)):
		default:
			out = append(out, p)
		}
	}
	return out
}

// NextEvictionGroup returns the evictable pods of the first group that still
// has any (pods.EvictionGroup's order), sorted by namespace/name.
func NextEvictionGroup(waiting []*corev1.Pod) []*corev1.Pod {
	var groups [pods.GroupCriticalDaemon + 1][]*corev1.Pod
	for _, p := range waiting {
		if pods.Evictable(p) {
			g := pods.EvictionGroup(p)
			groups[g] = append(groups[g], p)
		}
	}
	for _, g := range groups {
		if len(g) > 0 {
			sort.Slice(g, func(i, j int) bool {
				if g[i].Namespace != g[j].Namespace {
					return g[i].Namespace < g[j].Namespace
				}
				return g[i].Name < g[j].Name
			})
			return g
		}
	}
	return nil
}
