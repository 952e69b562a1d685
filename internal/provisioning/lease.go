package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

// keepLease renews the lease in the background while the run lasts and
// cancels the run if the lease is lost: another provisioner may be planning
// by then, and two planners would double the capacity.
func (p *Provisioner) keepLease(ctx context.Context, lease *store.Lease) (context.Context, func()) {
	runCtx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(p.s.LeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-runCtx.Done():
				return
			case <-t.C:
				if err := p.d.Store.RenewLease(runCtx, lease, p.s.LeaseDuration); err != nil {
					if errors.Is(err, store.ErrLeaseLost) {
						cancel(fmt.Errorf("provisioner lease lost: %w", err))
						return
					}
					p.log.WarnContext(runCtx, "renewing the provisioner lease", "error", err)
				}
			}
		}
	})
	return runCtx, func() {
		close(done)
		wg.Wait()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer rcancel()
		if err := p.d.Store.ReleaseLease(rctx, lease); err != nil && !errors.Is(err, store.ErrLeaseLost) {
			p.log.WarnContext(ctx, "releasing the provisioner lease", "error", err)
		}
		cancel(nil)
	}
}
