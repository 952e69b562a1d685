package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/catalog"
)

// ec2Shapes are the raw EC2 answers a catalog is built from.
type ec2Shapes struct {
	types     []ec2types.InstanceTypeInfo
	offerings []ec2types.InstanceTypeOffering
	zones     map[string]string
	fetched   time.Time
}

// catalogCache holds the last built catalog and what it was built from.
type catalogCache struct {
	mu        sync.Mutex
	shapes    *ec2Shapes
	built     *catalog.Catalog
	builtFrom [2]time.Time // shapes.fetched, prices.FetchedAt
}

// shapesTTL is how long instance type shapes and offerings are reused: they
// change when AWS launches types or zones, not minute to minute.
const shapesTTL = time.Hour

// Catalog returns the region's instance types with offerings and prices:
// DescribeInstanceTypes + DescribeInstanceTypeOfferings (availability zones)
// + DescribeAvailabilityZones, priced through Prices (store may be nil), and
// built with catalog.FromEC2. Offerings marked unavailable in the ICE set are
// not reflected here; use ApplyICE.
func (p *Provider) Catalog(ctx context.Context, store PriceStore) (*catalog.Catalog, error) {
	prices, err := p.Prices(ctx, store, false)
	if err != nil {
		return nil, err
	}
	c := &p.catalogs
	c.mu.Lock()
	defer c.mu.Unlock()
	now := p.opts.Now()
	if c.shapes == nil || now.Sub(c.shapes.fetched) >= shapesTTL {
		shapes, err := p.fetchShapes(ctx)
		if err != nil {
			if c.built != nil {
				p.log.WarnContext(ctx, "instance types not refreshed; using the previous catalog", "error", err)
				return c.built, nil
			}
			return nil, err
		}
		c.shapes = shapes
	}
	key := [2]time.Time{c.shapes.fetched, prices.FetchedAt}
	if c.built != nil && c.builtFrom == key {
		return c.built, nil
	}
	built, err := catalog.FromEC2(catalog.EC2Input{
		Region:            p.opts.Region,
		InstanceTypes:     c.shapes.types,
		Offerings:         c.shapes.offerings,
		Zones:             c.shapes.zones,
		OnDemand:          prices.OnDemand,
		OnDemandSource:    prices.OnDemandSource,
		Spot:              prices.SpotKeys(),
		SpotSource:        prices.SpotSource,
		DeriveMissingSpot: prices.Spot == nil,
	})
	if err != nil {
		return nil, fmt.Errorf("build catalog %s: %w", p.opts.Region, err)
	}
	c.built, c.builtFrom = built, key
	return built, nil
}

func (p *Provider) fetchShapes(ctx context.Context) (*ec2Shapes, error) {
	s := &ec2Shapes{fetched: p.opts.Now(), zones: map[string]string{}}
	tp := ec2.NewDescribeInstanceTypesPaginator(p.clients.EC2, &ec2.DescribeInstanceTypesInput{MaxResults: sdkaws.Int32(100)})
	var err error
	s.types, err = allPages(ctx, tp.HasMorePages, tp.NextPage,
		func(o *ec2.DescribeInstanceTypesOutput) []ec2types.InstanceTypeInfo { return o.InstanceTypes })
	if err != nil {
		return nil, fmt.Errorf("describe instance types: %w", err)
	}
	op := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.clients.EC2, &ec2.DescribeInstanceTypeOfferingsInput{
		LocationType: ec2types.LocationTypeAvailabilityZone,
		MaxResults:   sdkaws.Int32(1000),
	})
	s.offerings, err = allPages(ctx, op.HasMorePages, op.NextPage,
		func(o *ec2.DescribeInstanceTypeOfferingsOutput) []ec2types.InstanceTypeOffering {
			return o.InstanceTypeOfferings
		})
	if err != nil {
		return nil, fmt.Errorf("describe instance type offerings: %w", err)
	}
	az, err := p.clients.EC2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil {
		return nil, fmt.Errorf("describe availability zones: %w", err)
	}
	for _, z := range az.AvailabilityZones {
		if z.ZoneType != nil && *z.ZoneType != "availability-zone" {
			continue // Local and Wavelength Zones need opt-in and are not offered to NodePools
		}
		if z.State != "" && z.State != ec2types.AvailabilityZoneStateAvailable {
			continue
		}
		s.zones[sdkaws.ToString(z.ZoneName)] = sdkaws.ToString(z.ZoneId)
	}
	if len(s.types) == 0 || len(s.offerings) == 0 || len(s.zones) == 0 {
		return nil, fmt.Errorf("describe instance types: got %d types, %d offerings, %d zones", len(s.types), len(s.offerings), len(s.zones))
	}
	return s, nil
}

// ApplyICE returns c with the offerings in the ICE set marked unavailable.
// Types without such offerings are shared with c; affected types are copied,
// since catalog types are immutable.
func (p *Provider) ApplyICE(c *catalog.Catalog) (*catalog.Catalog, error) {
	ice := p.ice.Snapshot()
	if len(ice) == 0 {
		return c, nil
	}
	types := make([]*catalog.InstanceType, 0, len(c.Types))
	for _, it := range c.Types {
		var copied *catalog.InstanceType
		for i, o := range it.Offerings {
			if !o.Available {
				continue
			}
			if !unavailableIn(ice, OfferingKeyOf(it.Name, o)) {
				continue
			}
			if copied == nil {
				cp := *it
				cp.Offerings = append([]catalog.Offering(nil), it.Offerings...)
				copied = &cp
			}
			copied.Offerings[i].Available = false
		}
		if copied != nil {
			types = append(types, copied)
		} else {
			types = append(types, it)
		}
	}
	out, err := catalog.New(c.Region, c.Zones, types)
	if err != nil {
		return nil, fmt.Errorf("apply ICE set: %w", err)
	}
	return out, nil
}
