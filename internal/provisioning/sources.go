package provisioning

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/scheduling"
)

// ProviderCatalog is a Deps.Catalog over the EC2 provider: the region's
// instance types priced from the shared price cache, or the embedded
// catalog of the region when EC2 cannot be read (planning with list prices
// beats not planning; the launch itself still needs EC2).
func ProviderCatalog(p *nwaws.Provider, prices nwaws.PriceStore, region string, log *slog.Logger) func(context.Context) (*catalog.Catalog, error) {
	return func(ctx context.Context) (*catalog.Catalog, error) {
		cat, err := p.Catalog(ctx, prices)
		if err == nil {
			return cat, nil
		}
		if log != nil {
			log.WarnContext(ctx, "instance types from EC2 unavailable; planning with the embedded catalog", "error", err)
		}
		builtin, berr := catalog.Builtin(region)
		if berr != nil {
			return nil, fmt.Errorf("%w; embedded catalog: %w", err, berr)
		}
		return builtin, nil
	}
}

// ForNodeClasses wraps a Deps.Catalog so the catalog it returns knows
// what each of cfg's EC2NodeClasses selects in EC2: its capacity
// reservations and its placement group (read on every call, through the
// provider's caches: a reservation's room changes with every launch). A
// class whose reservations or group cannot be read plans without them.
func ForNodeClasses(next func(context.Context) (*catalog.Catalog, error), p *nwaws.Provider, cfg *apis.Config) func(context.Context) (*catalog.Catalog, error) {
	return func(ctx context.Context) (*catalog.Catalog, error) {
		cat, err := next(ctx)
		if err != nil || cfg == nil {
			return cat, err
		}
		cat = p.WithReservations(ctx, cat, cfg.NodeClasses)
		return p.WithPlacementGroups(ctx, cat, cfg.NodeClasses), nil
	}
}

// ProviderICE is a Deps.Unavailable over the provider's ICE set, synced
// with the shared store first so offerings another function found short
// are avoided too.
func ProviderICE(p *nwaws.Provider) func(context.Context) (map[scheduling.OfferingKey]bool, error) {
	return func(ctx context.Context) (map[scheduling.OfferingKey]bool, error) {
		ice := p.ICE()
		err := ice.Sync(ctx, 0)
		out := map[scheduling.OfferingKey]bool{}
		for k := range ice.Snapshot() {
			out[k] = true
		}
		return out, err
	}
}

// ReadICE is the ICE set a plan avoids, read through unavailable (a
// Deps.Unavailable; nil reads none). A set that cannot be read is logged
// and planning goes on with what was returned: the launch path consults the
// ICE set itself, so a stale one costs at most a re-plan.
func ReadICE(ctx context.Context, unavailable func(context.Context) (map[scheduling.OfferingKey]bool, error), log *slog.Logger) map[scheduling.OfferingKey]bool {
	if unavailable == nil {
		return nil
	}
	out, err := unavailable(ctx)
	if err != nil {
		log.WarnContext(ctx, "reading the ICE set", "error", err)
	}
	return out
}
