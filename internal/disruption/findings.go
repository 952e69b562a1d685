package disruption

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/nodewright/nodewright/internal/kube"
)

// findingRepeat is how often an unchanged finding (the same node, reason
// and text) is emitted again. A steady cluster's findings are the same
// every minute: one event each per minute would be a write (a create that
// conflicts, a read, an update) per finding per pass for nothing new. A
// warm function emits a finding when it first sees it, when its text
// changes, and every 15 minutes while it holds, so `kubectl describe node`
// keeps showing it (events live an hour); a cold one emits it again once.
const findingRepeat = 15 * time.Minute

// findingMemo is when each finding was last emitted by this Controller.
type findingMemo struct {
	mu   sync.Mutex
	last map[Finding]time.Time
}

// due reports whether f is new or its repeat is due at now, and if so
// records it as emitted at now. Entries older than findingRepeat go, so
// the memo holds at most the findings of the last 15 minutes.
func (m *findingMemo) due(f Finding, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.last == nil {
		m.last = map[Finding]time.Time{}
	}
	if at, ok := m.last[f]; ok && now.Sub(at) < findingRepeat {
		return false
	}
	m.last[f] = now
	return true
}

// forget drops the findings emitted findingRepeat or more before now.
func (m *findingMemo) forget(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for f, at := range m.last {
		if now.Sub(at) >= findingRepeat {
			delete(m.last, f)
		}
	}
}

// findingWriters bounds the findings' event writes in flight: a pass's
// hundred events, one after the other, took as long as its decision.
const findingWriters = 10

// findings turns a decision's new or due findings into node events
// (capped per pass); unchanged ones are counted, not emitted. The events
// are written concurrently and the pass waits for them, so none is lost
// when the function returns.
func (c *Controller) findings(ctx context.Context, v *View, fs []Finding) {
	now := c.d.Now()
	c.memo.forget(now)
	var writes errgroup.Group
	writes.SetLimit(findingWriters)
	defer func() { _ = writes.Wait() }() // event errors are logged by c.event
	emitted, repeats := 0, 0
	for _, f := range fs {
		if emitted >= c.s.MaxEvents {
			c.log.InfoContext(ctx, "disruption findings capped", "emitted", emitted, "dropped", len(fs)-emitted-repeats)
			return
		}
		if !c.memo.due(f, now) {
			repeats++
			continue
		}
		emitted++
		c.log.InfoContext(ctx, "disruption finding", "node", f.Node, "reason", f.Reason, "message", f.Text)
		writes.Go(func() error {
			c.event(ctx, v, f.Node, kube.EventNormal, f.Reason, "%s", f.Text)
			return nil
		})
	}
	if repeats > 0 {
		c.log.DebugContext(ctx, "disruption findings unchanged; not emitted again", "findings", repeats)
	}
}
