package lifecycle

import (
	"context"
	"fmt"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/metrics"
)

// expiry marks a launched claim past its expireAfter for deletion.
// Expiration is forceful (Karpenter v1): no budget, no do-not-disrupt,
// registered or not.
func (c *Controller) expiry(ctx context.Context, s *claimState) (bool, error) {
	exp, ok := s.cl.Spec.ExpireAfter.Get()
	if !ok || exp <= 0 || s.now.Before(s.cl.CreationTimestamp.Add(exp)) {
		return false, nil
	}
	s.log.InfoContext(ctx, "nodeclaim expired", "expire-after", exp.String())
	c.d.Metrics.Add(metrics.NodeClaimsDisrupted, 1, metrics.Dimensions{"reason": apis.DeletionReasonExpired, "nodepool": s.cl.NodePoolName()})
	return s.finish(c.markAndTerminate(ctx, s.cl, apis.DeletionReasonExpired, fmt.Sprintf("expireAfter %s elapsed", exp), ActionExpired))
}
