package ec2sim

import "github.com/nodewright/nodewright/internal/catalog"

// SpotPrice is the simulated spot price of a pool. Real spot prices move and
// are not in ../shared/aws-data, so they are DERIVED with the project
// catalog's rule (catalog.DerivedSpotPrice: a fixed per-(type, zone)
// discount off on-demand), so simulator and catalog agree. Tests can pin a
// price with SetSpotPrice.
func (c *Cloud) SpotPrice(instanceType, zone string) (float64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spotPrice(instanceType, zone)
}

func (c *Cloud) spotPrice(instanceType, zone string) (float64, bool) {
	if p, ok := c.spotOverrides[[2]string{instanceType, zone}]; ok {
		return p, true
	}
	od, ok := c.cfg.Catalog.OnDemand[instanceType]
	if !ok {
		return 0, false
	}
	return catalog.DerivedSpotPrice(instanceType, zone, od), true
}

// SetSpotPrice pins the spot price of a pool.
func (c *Cloud) SetSpotPrice(instanceType, zone string, price float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spotOverrides[[2]string{instanceType, zone}] = price
}

// OnDemandPrice is the catalog's Linux on-demand price.
func (c *Cloud) OnDemandPrice(instanceType string) (float64, bool) {
	p, ok := c.cfg.Catalog.OnDemand[instanceType]
	return p, ok
}
