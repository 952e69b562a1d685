// Package inspect reads what the serverless controllers recorded in DynamoDB
// (NodeClaims, tombstones, the price cache) and formats it the way operators
// know from kubectl: `get nodeclaims`, `get nodepools`, `describe nodeclaim`.
// nodewright keeps no objects in the cluster, so this is the only view of its
// NodeClaims; the CLI (cmd/nodewright get/describe) is a thin shell around it.
//
// Reading and formatting are split: Load* functions talk to the store, the
// Write* functions are pure over the loaded data and a clock, so their output
// is tested byte for byte against golden files.
package inspect

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/aws/awsstore"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/store"
)

// Claim is one NodeClaim as the CLI shows it: the stored record and, for a
// tombstone, when it was deleted.
type Claim struct {
	*apis.NodeClaim
	// DeletedAt is set for tombstones (the claim's final state).
	DeletedAt time.Time
}

// Tombstoned reports whether the claim is a deleted record kept for auditing.
func (c Claim) Tombstoned() bool { return !c.DeletedAt.IsZero() }

// Prices answers "what does this node cost per hour" from the price snapshot
// the functions cached in the store, falling back to the embedded catalog.
// The zero value knows no prices (every lookup reports ok=false).
type Prices struct {
	Snapshot *nwaws.PriceSnapshot
	Catalog  *catalog.Catalog
}

// Price returns the $/hour of an instance type in a zone and capacity type.
func (p Prices) Price(instanceType, zone, capacityType string) (float64, bool) {
	if instanceType == "" {
		return 0, false
	}
	if s := p.Snapshot; s != nil {
		od, hasOD := s.OnDemand[instanceType]
		switch capacityType {
		case apis.CapacityTypeSpot:
			if v, ok := s.Spot[instanceType][zone]; ok {
				return v, true
			}
			if hasOD && zone != "" {
				return catalog.DerivedSpotPrice(instanceType, zone, od), true
			}
		case apis.CapacityTypeOnDemand, apis.CapacityTypeReserved, "":
			if hasOD {
				return od, true
			}
		}
	}
	if p.Catalog != nil {
		if it, ok := p.Catalog.Get(instanceType); ok {
			ct := capacityType
			if ct == "" || ct == apis.CapacityTypeReserved {
				ct = apis.CapacityTypeOnDemand
			}
			if o, ok := it.Offering(zone, ct); ok {
				return o.Price, true
			}
			// The zone is unknown to the catalog: any zone's price of that
			// capacity type is a better answer than none.
			for _, o := range it.Offerings {
				if o.CapacityType == ct {
					return o.Price, true
				}
			}
		}
	}
	return 0, false
}

// ClaimPrice is Price for a claim's launched type, zone and capacity type.
func (p Prices) ClaimPrice(nc *apis.NodeClaim) (float64, bool) {
	return p.Price(nc.Labels[catalog.LabelInstanceType], nc.Labels[catalog.LabelTopologyZone], nc.Labels[apis.CapacityTypeLabelKey])
}

// LoadPrices reads region's cached price snapshot from the store and the
// embedded catalog of region; either may be missing (a region the catalog
// does not know, a table no function has written prices to yet).
func LoadPrices(ctx context.Context, st *store.Store, region string) (Prices, error) {
	var p Prices
	snap, err := awsstore.Prices{Store: st}.LoadPrices(ctx, region)
	if err != nil {
		return p, err
	}
	p.Snapshot = snap
	if cat, err := catalog.Builtin(region); err == nil {
		p.Catalog = cat
	}
	return p, nil
}

// LoadClaims returns the live claims (of one NodePool when nodePool is not
// empty), sorted by name, and with tombstones also the unexpired deleted ones.
func LoadClaims(ctx context.Context, st *store.Store, nodePool string, tombstones bool) ([]Claim, error) {
	live, err := st.ListNodeClaims(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodeclaims in table %s: %w", st.Table(), err)
	}
	var out []Claim
	for _, nc := range live {
		if nodePool == "" || nc.NodePoolName() == nodePool {
			out = append(out, Claim{NodeClaim: nc})
		}
	}
	if tombstones {
		ts, err := st.ListTombstones(ctx)
		if err != nil {
			return nil, fmt.Errorf("list tombstones in table %s: %w", st.Table(), err)
		}
		for _, t := range ts {
			if nodePool == "" || t.Claim.NodePoolName() == nodePool {
				out = append(out, Claim{NodeClaim: t.Claim, DeletedAt: t.DeletedAt})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return !out[i].Tombstoned() && out[j].Tombstoned()
	})
	return out, nil
}

// ErrClaimNotFound: no live claim or tombstone of that name.
var ErrClaimNotFound = errors.New("nodeclaim not found")

// LoadClaim returns the live claim of that name, or its tombstone.
func LoadClaim(ctx context.Context, st *store.Store, name string) (Claim, error) {
	nc, err := st.GetNodeClaim(ctx, name)
	if err == nil {
		return Claim{NodeClaim: nc}, nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return Claim{}, fmt.Errorf("get nodeclaim %s: %w", name, err)
	}
	t, err := st.GetTombstone(ctx, name)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return Claim{}, fmt.Errorf("nodeclaim %q in table %s: %w (tombstones are kept for 7 days)", name, st.Table(), ErrClaimNotFound)
		}
		return Claim{}, fmt.Errorf("get tombstone of nodeclaim %s: %w", name, err)
	}
	return Claim{NodeClaim: t.Claim, DeletedAt: t.DeletedAt}, nil
}
