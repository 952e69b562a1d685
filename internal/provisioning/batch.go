package provisioning

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/state"
)

// batch waits for a burst of pending pods to settle, as Karpenter's batcher
// does: the window opens with the first provisionable pod seen, closes once
// no new one has appeared for BatchIdle, and never stays open longer than
// BatchMax. It returns the number of distinct pods seen and the last
// listing of pending pods, which the pass plans from: taken as the window
// closed, so the pass does not list them again. With nothing
// pending it returns at once (the pass still runs, to resume claims and
// replace capacity of deleting nodes).
func (p *Provisioner) batch(ctx context.Context) (int, *kube.Snapshot, error) {
	start := p.d.Now()
	seen := map[types.UID]struct{}{}
	lastNew := start
	for {
		// From the watch cache, as the pass plans (see prepare): a poll
		// every BatchPoll of every pending pod, fresh from etcd, was most
		// of what a 5,000-pod burst cost the API server before launching.
		snap, err := p.d.Cluster.Snapshot(ctx, kube.SnapshotOptions{Parts: kube.PartPendingPods, Cached: true})
		if err != nil {
			return len(seen), nil, fmt.Errorf("provisioner: batching: %w", err)
		}
		now := p.d.Now()
		fresh := 0
		for _, pod := range snap.PendingPods {
			if ok, _ := state.Provisionable(pod); !ok {
				continue
			}
			key := pod.UID
			if key == "" {
				key = types.UID(podKey(pod))
			}
			if _, dup := seen[key]; !dup {
				seen[key] = struct{}{}
				fresh++
			}
		}
		if fresh > 0 {
			lastNew = now
		}
		if len(seen) == 0 {
			return 0, snap, nil
		}
		idleLeft := p.s.BatchIdle - now.Sub(lastNew)
		maxLeft := p.s.BatchMax - now.Sub(start)
		if idleLeft <= 0 || maxLeft <= 0 {
			return len(seen), snap, nil
		}
		if err := p.d.Sleep(ctx, min(p.s.BatchPoll, idleLeft, maxLeft)); err != nil {
			return len(seen), nil, fmt.Errorf("provisioner: batching: %w", err)
		}
	}
}
