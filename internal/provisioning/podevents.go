package provisioning

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/scheduling"
	"github.com/nodewright/nodewright/internal/state"
)

// nominate records where pods go and tells each pod.
func (pa *pass) nominate(ctx context.Context, pods []*corev1.Pod, target, where string) {
	pa.mu.Lock()
	for _, pod := range pods {
		pa.nominated[podKey(pod)] = nomination{pod: pod, target: target}
	}
	pa.res.Nominated += len(pods)
	pa.mu.Unlock()
	pa.p.d.Metrics.Add(metrics.PodsNominated, float64(len(pods)), nil)
	// One line per target (its pods are bounded by a node's pod capacity)
	// links each pod to its node or claim: the saved "why is this pod
	// pending" query follows a pod from the webhook to its launch by it.
	keys := make([]string, len(pods))
	for i, pod := range pods {
		keys[i] = podKey(pod)
	}
	pa.p.log.InfoContext(ctx, "pods nominated", "target", target, "where", where, "pod", keys)
	for _, pod := range pods {
		if !pa.nominations.take(pa.p.d.Now()) {
			pa.limited.Add(1)
			continue
		}
		pa.podEvent(ctx, pod, kube.EventNormal, ReasonNominated, "Pod should schedule on: %s", where)
	}
}

// nominateExisting covers pods the plan put on existing nodes and on
// in-flight claims other than those this round launched (which nominate
// their own pods once launched).
func (pa *pass) nominateExisting(ctx context.Context, c *state.Cluster, plan *scheduling.Plan, jobs []*job) {
	launchedHere := map[string]bool{}
	for _, j := range jobs {
		launchedHere[j.claim.Name] = true
	}
	for _, np := range plan.ExistingNodes {
		if launchedHere[np.Name] {
			continue
		}
		where := "node/" + np.Name
		if n, ok := c.Node(np.Name); ok && n.InFlight() {
			where = "nodeclaim/" + np.Name
		}
		pa.nominate(ctx, np.PodRefs, np.Name, where)
	}
}

// unschedulable reports pods no node or claim can take, one log line per
// distinct reason.
func (pa *pass) unschedulable(ctx context.Context, us []*scheduling.Unschedulable) {
	if len(us) == 0 {
		return
	}
	pa.res.Unschedulable += len(us)
	byReason := map[string][]string{}
	for _, u := range us {
		byReason[u.Reason] = append(byReason[u.Reason], u.Pod)
		if u.PodRef != nil {
			pa.podEvent(ctx, u.PodRef, kube.EventWarning, ReasonFailedScheduling, "Failed to schedule pod, %s", u.Reason)
		}
	}
	reasons := make([]string, 0, len(byReason))
	for r := range byReason {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		pods := byReason[r]
		sample := pods
		if len(sample) > 5 {
			sample = sample[:5]
		}
		pa.p.log.InfoContext(ctx, "pods unschedulable", "reason", r, "count", len(pods), "pod", sample)
	}
}

type podEvent struct {
	pod                  *corev1.Pod
	typ, reason, message string
}

// startEvents runs the workers that send the run's pod events, so launches
// never wait on the API server's event writes; the returned func waits for
// the queue to drain.
func (pa *pass) startEvents(ctx context.Context) func() {
	// Room for every event the run may emit (the cap bounds them): a
	// launch that nominates its pods never blocks on a full queue. With a
	// smaller queue a 5,000-pod burst's launches waited on the event
	// writes, since each nominates its pods once launched.
	pa.eventQ = make(chan podEvent, max(pa.p.s.MaxPodEvents, 0))
	var wg sync.WaitGroup
	for range eventWorkers {
		wg.Go(func() {
			for e := range pa.eventQ {
				if err := pa.p.d.Cluster.PodEvent(ctx, e.pod, e.typ, e.reason, "%s", e.message); err != nil {
					pa.p.log.DebugContext(ctx, "pod event", "pod", podKey(e.pod), "reason", e.reason, "error", err)
				}
			}
		})
	}
	return func() {
		close(pa.eventQ)
		wg.Wait()
	}
}

// eventWorkers bounds concurrent event writes (the client's QPS limit
// applies on top): enough to keep up with the client's 200 writes a second
// at an API server round trip of up to 100 ms.
const eventWorkers = 20

// podEvent queues an event unless the run's cap is reached; events are
// advisory, so failures are only logged. The queue holds the whole cap, so
// this never waits.
func (pa *pass) podEvent(ctx context.Context, pod *corev1.Pod, typ, reason, format string, args ...any) {
	if pa.events.Add(1) > int64(pa.p.s.MaxPodEvents) {
		pa.dropped.Add(1)
		return
	}
	select {
	case pa.eventQ <- podEvent{pod: pod, typ: typ, reason: reason, message: fmt.Sprintf(format, args...)}:
	case <-ctx.Done():
	}
}

func podKey(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// tokenBucket rate-limits a run's Nominated events as Karpenter limits
// them (Settings.NominationEventBurst and NominationEventRate; the rest are
// not written), on the provisioner's clock: a burst of 5,000 pods made
// 1,000 event writes a pass (the cap), the pass's longest tail on a busy
// API server, where Karpenter makes about 10 plus 5 a second. Every
// nomination stays in the "pods nominated" log line, which the saved
// queries follow.
type tokenBucket struct {
	mu     sync.Mutex
	burst  float64
	rate   float64 // per second; negative: no limit
	tokens float64
	last   time.Time
	init   bool
}

// take spends a token if one is left at now.
func (b *tokenBucket) take(now time.Time) bool {
	if b.rate < 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.init {
		b.tokens, b.last, b.init = b.burst, now, true
	}
	if d := now.Sub(b.last); d > 0 {
		b.tokens = min(b.burst, b.tokens+d.Seconds()*b.rate)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
