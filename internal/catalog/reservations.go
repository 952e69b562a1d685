package catalog

import (
	"maps"
	"sort"
	"strconv"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
)

// CapacityTypeReserved is the capacity type of an offering backed by a
// capacity reservation (an ODCR or a capacity block), as in Karpenter.
const CapacityTypeReserved = apis.CapacityTypeReserved

// Reservation types, as DescribeCapacityReservations reports them and the
// karpenter.k8s.aws/capacity-reservation-type label carries them.
const (
	ReservationTypeDefault       = "default"
	ReservationTypeCapacityBlock = "capacity-block"
)

// Labels only reserved nodes carry (Karpenter's).
const (
	LabelCapacityReservationID            = apis.CapacityReservationIDLabelKey
	LabelCapacityReservationType          = apis.CapacityReservationTypeLabelKey
	LabelCapacityReservationInterruptible = apis.CapacityReservationInterruptibleLabelKey
)

// reservedPriceDivisor turns a type's on-demand price into its reserved
// price: a reservation is paid for whether used or not, so launching into
// it costs next to nothing, and the solver fills reservations before
// anything else. Dividing (rather than using 0) keeps larger types dearer
// than smaller ones, so consolidation still prefers the smaller.
const reservedPriceDivisor = 1e7

// Reservation is an active capacity reservation an EC2NodeClass selects.
type Reservation struct {
	ID           string
	InstanceType string
	Zone         string
	OwnerID      string
	// Type is ReservationTypeDefault or ReservationTypeCapacityBlock.
	Type string
	// Available is how many more instances it takes now.
	Available     int
	Interruptible bool
	// EndTime is when it ends (zero: no end date).
	EndTime time.Time
}

// WithReservations returns a catalog that also knows the reservations each
// EC2NodeClass selects (by class name); ForNodeClass turns them into
// offerings. The receiver is unchanged and its types are shared.
func (c *Catalog) WithReservations(byClass map[string][]Reservation) *Catalog {
	out := *c
	out.reservations = maps.Clone(byClass)
	return &out
}

// Reservations are the reservations the EC2NodeClass called class selects.
func (c *Catalog) Reservations(class string) []Reservation { return c.reservations[class] }

// ForNodeClass returns the catalog as the EC2NodeClass called class sees
// it: every type it holds a reservation of gains one reserved offering per
// reservation (price near zero, ReservationCapacity its available count,
// unavailable when full); with a placement group, only the types that
// support its strategy remain, labelled with the group's id. Types the
// class changes nothing of are shared; the others are copied, so the
// receiver is unchanged.
func (c *Catalog) ForNodeClass(class string) *Catalog {
	rs := c.reservations[class]
	pg, placed := c.placementGroups[class]
	if len(rs) == 0 && !placed {
		return c
	}
	byType := map[string][]Reservation{}
	for _, r := range rs {
		byType[r.InstanceType] = append(byType[r.InstanceType], r)
	}
	out := c.derived(len(c.Types))
	for _, it := range c.Types {
		if placed && !it.SupportsPlacement(pg.Strategy) {
			continue // EC2 refuses the type in a group of this strategy
		}
		if mine := byType[it.Name]; len(mine) > 0 {
			cp := *it
			cp.Offerings = append(append([]Offering(nil), it.Offerings...), c.reservedOfferings(it, mine)...)
			it = &cp
		}
		if placed {
			it = pg.placed(it)
		}
		out.Types = append(out.Types, it)
		out.byName[it.Name] = it
	}
	return out
}

// reservedOfferings are the offerings of a type's reservations in the
// catalog's zones, ordered by zone then id.
func (c *Catalog) reservedOfferings(it *InstanceType, rs []Reservation) []Offering {
	var out []Offering
	for _, r := range rs {
		z, ok := c.Zone(r.Zone)
		if !ok {
			continue
		}
		price := 0.0
		if od, ok := it.Offering(r.Zone, CapacityTypeOnDemand); ok {
			price = od.Price / reservedPriceDivisor
		}
		out = append(out, Offering{Zone: z.Name, ZoneID: z.ID, CapacityType: CapacityTypeReserved, Price: price,
			Available: r.Available > 0, PriceSource: PriceSourceReserved, ReservationID: r.ID, ReservationType: r.Type,
			ReservationCapacity: max(r.Available, 0), Interruptible: r.Interruptible})
		if !r.EndTime.IsZero() {
			end := r.EndTime
			out[len(out)-1].ReservationEnd = &end
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Zone != out[j].Zone {
			return out[i].Zone < out[j].Zone
		}
		return out[i].ReservationID < out[j].ReservationID
	})
	return out
}

// PriceSourceReserved marks the near-zero price of a reserved offering.
const PriceSourceReserved = "reserved"

// ReservationLabels are the labels a node launched into a reserved
// offering's reservation carries: its id, type and whether it is
// interruptible (nil for an offering without a reservation).
func ReservationLabels(o Offering) map[string]string {
	if o.ReservationID == "" {
		return nil
	}
	t := o.ReservationType
	if t == "" {
		t = ReservationTypeDefault
	}
	return map[string]string{
		LabelCapacityReservationID:            o.ReservationID,
		LabelCapacityReservationType:          t,
		LabelCapacityReservationInterruptible: strconv.FormatBool(o.Interruptible),
	}
}
