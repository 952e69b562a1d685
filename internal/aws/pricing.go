package aws

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"

	"github.com/nodewright/nodewright/internal/catalog"
)

// PriceSnapshot is one region's prices at one time, as cached in the store.
type PriceSnapshot struct {
	Region    string    `json:"region"`
	FetchedAt time.Time `json:"fetchedAt"`
	// OnDemand is Linux on-demand $/hour per instance type.
	OnDemand       map[string]float64 `json:"onDemand"`
	OnDemandSource string             `json:"onDemandSource"` // catalog.PriceSource*
	// Spot is the current spot $/hour per instance type and zone; nil when no
	// spot feed was reachable (offerings then get derived spot prices).
	Spot       map[string]map[string]float64 `json:"spot,omitempty"`
	SpotSource string                        `json:"spotSource,omitempty"`
}

// SpotKeys converts Spot to the catalog's key form.
func (s *PriceSnapshot) SpotKeys() map[catalog.SpotKey]float64 {
	if s.Spot == nil {
		return nil
	}
	out := map[catalog.SpotKey]float64{}
	for it, zones := range s.Spot {
		for z, p := range zones {
			out[catalog.SpotKey{InstanceType: it, Zone: z}] = p
		}
	}
	return out
}

// PriceStore caches price snapshots across function invocations
// (internal/store implements it on DynamoDB).
type PriceStore interface {
	// LoadPrices returns the stored snapshot of region, or nil when none.
	LoadPrices(ctx context.Context, region string) (*PriceSnapshot, error)
	SavePrices(ctx context.Context, s *PriceSnapshot) error
}

// Prices returns the region's prices: the stored snapshot while it is younger
// than Options.PriceRefresh (unless force), else freshly fetched from Pricing
// GetProducts and DescribeSpotPriceHistory and saved. When the Pricing API is
// unreachable (isolated VPCs have no endpoint for it) a stale snapshot is
// kept, and without one the embedded catalog's list prices are used.
// store may be nil.
func (p *Provider) Prices(ctx context.Context, store PriceStore, force bool) (*PriceSnapshot, error) {
	now := p.opts.Now()
	p.priceMu.Lock()
	memo, memoAt := p.priceMemo, p.priceMemoAt
	p.priceMu.Unlock()
	// A warm function reuses its snapshot for a while instead of re-reading
	// the (chunked) blob from the store on every pass.
	if !force && memo != nil && now.Sub(memoAt) < priceMemoTTL && now.Sub(memo.FetchedAt) < p.opts.PriceRefresh {
		return memo, nil
	}
	snap, err := p.prices(ctx, store, force)
	if err == nil {
		p.priceMu.Lock()
		p.priceMemo, p.priceMemoAt = snap, now
		p.priceMu.Unlock()
	}
	return snap, err
}

// priceMemoTTL is how long a function trusts its in-memory price snapshot
// before checking the store for one another function refreshed.
const priceMemoTTL = 10 * time.Minute

func (p *Provider) prices(ctx context.Context, store PriceStore, force bool) (*PriceSnapshot, error) {
	var cached *PriceSnapshot
	if store != nil {
		s, err := store.LoadPrices(ctx, p.opts.Region)
		if err != nil {
			p.log.WarnContext(ctx, "price cache unreadable; fetching", "error", err)
		} else {
			cached = s
		}
	}
	now := p.opts.Now()
	if cached != nil && !force && now.Sub(cached.FetchedAt) < p.opts.PriceRefresh {
		return cached, nil
	}
	snap := &PriceSnapshot{Region: p.opts.Region, FetchedAt: now}
	od, odErr := p.fetchOnDemand(ctx)
	switch {
	case odErr == nil:
		snap.OnDemand, snap.OnDemandSource = od, catalog.PriceSourcePricingAPI
	case cached != nil && len(cached.OnDemand) > 0:
		p.log.WarnContext(ctx, "Pricing API unavailable; keeping cached on-demand prices", "error", odErr, "fetched-at", cached.FetchedAt)
		snap.OnDemand, snap.OnDemandSource = cached.OnDemand, cached.OnDemandSource
	default:
		builtin, err := builtinOnDemand(p.opts.Region)
		if err != nil {
			return nil, fmt.Errorf("prices %s: Pricing API: %w; embedded catalog: %w", p.opts.Region, odErr, err)
		}
		p.log.WarnContext(ctx, "Pricing API unavailable; using embedded list prices", "error", odErr)
		snap.OnDemand, snap.OnDemandSource = builtin, catalog.PriceSourceEmbedded
	}
	spot, spotErr := p.fetchSpot(ctx)
	switch {
	case spotErr == nil:
		snap.Spot, snap.SpotSource = spot, catalog.PriceSourcePricingAPI
	case cached != nil && cached.Spot != nil:
		p.log.WarnContext(ctx, "spot price history unavailable; keeping cached spot prices", "error", spotErr)
		snap.Spot, snap.SpotSource = cached.Spot, cached.SpotSource
	default:
		p.log.WarnContext(ctx, "spot price history unavailable; spot prices will be derived", "error", spotErr)
	}
	if odErr != nil && spotErr != nil && cached != nil {
		// Nothing new was learned; keep the old timestamp so the next run retries.
		snap.FetchedAt = cached.FetchedAt
	}
	if store != nil && (odErr == nil || spotErr == nil) {
		if err := store.SavePrices(ctx, snap); err != nil {
			p.log.WarnContext(ctx, "price cache not saved", "error", err)
		}
	}
	return snap, nil
}

// fetchOnDemand pages Pricing GetProducts for Linux, shared-tenancy,
// no-preinstalled-software, capacitystatus=Used on-demand prices of the region.
func (p *Provider) fetchOnDemand(ctx context.Context) (map[string]float64, error) {
	if p.clients.Pricing == nil {
		return nil, errors.New("no Pricing client")
	}
	filter := func(field, value string) pricingtypes.Filter {
		return pricingtypes.Filter{Type: pricingtypes.FilterTypeTermMatch, Field: sdkaws.String(field), Value: sdkaws.String(value)}
	}
	in := &pricing.GetProductsInput{
		ServiceCode:   sdkaws.String("AmazonEC2"),
		FormatVersion: sdkaws.String("aws_v1"),
		MaxResults:    sdkaws.Int32(100),
		Filters: []pricingtypes.Filter{
			filter("regionCode", p.opts.Region),
			filter("operatingSystem", "Linux"),
			filter("tenancy", "Shared"),
			filter("preInstalledSw", "NA"),
			filter("capacitystatus", "Used"),
			filter("productFamily", "Compute Instance"),
			filter("marketoption", "OnDemand"),
		},
	}
	pager := pricing.NewGetProductsPaginator(p.clients.Pricing, in)
	docs, err := allPages(ctx, pager.HasMorePages, pager.NextPage, func(o *pricing.GetProductsOutput) []string { return o.PriceList })
	return parsedPrices(fmt.Sprintf("pricing get products (%s)", p.opts.Region), docs, err, catalog.ParseOnDemandPriceList,
		func(n int) string { return fmt.Sprintf("no Linux on-demand prices in %d documents", n) })
}

// parsedPrices parses what one price source paged (items, or the paging
// error err) with parse; every error names the call (what), and a source
// that yields no price at all fails with empty's reason (given the number
// of items read).
func parsedPrices[T any, K comparable](what string, items []T, err error, parse func([]T) (map[K]float64, error), empty func(n int) string) (map[K]float64, error) {
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	prices, err := parse(items)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(prices) == 0 {
		return nil, fmt.Errorf("%s: %s", what, empty(len(items)))
	}
	return prices, nil
}

// fetchSpot reads the current spot price of every type in every zone: with
// StartTime now, DescribeSpotPriceHistory returns the price in force per
// (type, zone), paged. One call covers all zones, as Karpenter's does; the
// results are kept per zone.
func (p *Provider) fetchSpot(ctx context.Context) (map[string]map[string]float64, error) {
	now := p.opts.Now()
	in := &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime:           &now,
	}
	pager := ec2.NewDescribeSpotPriceHistoryPaginator(p.clients.EC2, in)
	hist, err := allPages(ctx, pager.HasMorePages, pager.NextPage,
		func(o *ec2.DescribeSpotPriceHistoryOutput) []ec2types.SpotPrice { return o.SpotPriceHistory })
	byKey, err := parsedPrices(fmt.Sprintf("describe spot price history (%s)", p.opts.Region), hist, err, catalog.SpotPricesFromHistory,
		func(int) string { return "no prices returned" })
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]float64{}
	for k, v := range byKey {
		if out[k.InstanceType] == nil {
			out[k.InstanceType] = map[string]float64{}
		}
		out[k.InstanceType][k.Zone] = v
	}
	return out, nil
}

// builtinOnDemand returns the embedded catalog's on-demand list prices for
// region (us-east-1's when the region is not embedded).
func builtinOnDemand(region string) (map[string]float64, error) {
	c, err := catalog.Builtin(region)
	if err != nil {
		c, err = catalog.Builtin("us-east-1")
		if err != nil {
			return nil, err
		}
	}
	out := map[string]float64{}
	for _, it := range c.Types {
		for _, o := range it.Offerings {
			if o.CapacityType == catalog.CapacityTypeOnDemand && o.Price > 0 {
				out[it.Name] = o.Price
				break
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("embedded catalog has no on-demand prices")
	}
	return out, nil
}
