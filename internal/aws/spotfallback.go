package aws

import (
	"context"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/catalog"
)

// Spot launches fail for two reasons no other spot offering fixes, and the
// claim then falls back to on-demand when it allows it (as Karpenter does:
// aws/karpenter-provider-aws PR #7998, pkg/providers/instance/instance.go
// v1.14.1, MarkCapacityTypeUnavailable on the first):
//   - AuthFailure.ServiceLinkedRoleCreationNotPermitted: the account has no
//     AWSServiceRoleForEC2Spot and the launching role may not create it
//     (Karpenter's TROUBLESHOOTING.md). That holds for every claim, so spot
//     is left out of every launch of this process for the ICE TTL.
//   - UnfulfillableCapacity with no override: the fleet could not fill its
//     spot capacity from any pool ("Unable to fulfill capacity due to your
//     request configuration", aws/karpenter-provider-aws #1233, #5789). The
//     claim's next attempt leaves spot out; other claims still try it. When
//     pools name their own capacity errors beside it, those pools are
//     marked and spot goes on with the others, as Karpenter's does.

// codeSpotRoleMissing is CreateFleet's per-override error for a spot
// launch without the spot service-linked role.
const codeSpotRoleMissing = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"

// spotBlock is the process-wide "spot launches cannot succeed until" mark.
type spotBlock struct {
	mu    sync.Mutex
	until time.Time
}

func (b *spotBlock) block(until time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if until.After(b.until) {
		b.until = until
	}
}

func (b *spotBlock) blocked(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return now.Before(b.until)
}

// spotDead reads a spot fleet's answer for the two errors above; it sets
// l.noSpot (and blocks spot process-wide for the role) and reports whether
// the next attempt should fall back.
func (p *Provider) spotDead(ctx context.Context, l *launch, errs []ec2types.CreateFleetError, capacityType string) bool {
	if capacityType != catalog.CapacityTypeSpot {
		return false
	}
	attributed := false
	for _, e := range errs {
		if e.LaunchTemplateAndOverrides != nil && e.LaunchTemplateAndOverrides.Overrides != nil && IsCapacityError(sdkaws.ToString(e.ErrorCode)) {
			attributed = true
		}
	}
	for _, e := range errs {
		switch code := sdkaws.ToString(e.ErrorCode); {
		case code == codeSpotRoleMissing:
			p.spot.block(p.opts.Now().Add(p.opts.ICETTL))
			p.log.ErrorContext(ctx, "spot launches need the EC2 Spot service-linked role; falling back to on-demand where allowed",
				"nodeclaim", l.claim.Name, "code", code, "fix", "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com")
			l.noSpot = true
		case code == "UnfulfillableCapacity" && !attributed && (e.LaunchTemplateAndOverrides == nil || e.LaunchTemplateAndOverrides.Overrides == nil):
			p.log.WarnContext(ctx, "spot capacity unfulfillable for the whole request; the claim falls back to on-demand where allowed",
				"nodeclaim", l.claim.Name, "message", sdkaws.ToString(e.ErrorMessage))
			l.noSpot = true
		}
	}
	return l.noSpot
}

// spotAllowed reports whether this launch may still use spot.
func (p *Provider) spotAllowed(l *launch) bool {
	return !l.noSpot && !p.spot.blocked(p.opts.Now())
}
