// Package catalog describes the EC2 instance types a NodePool may launch: their
// hardware, the labels a node of that type carries, the resources a kubelet on
// it will report as allocatable (computed the way Karpenter computes them) and
// the offerings (zone x capacity type) with their prices.
//
// Capacity reservations an EC2NodeClass selects are carried beside the
// region's types (WithReservations) and become reserved offerings, priced
// near zero with the reservation's room as their count, in the catalog that
// class sees (ForNodeClass).
//
// A Catalog is immutable once built: the solver caches per-pod-shape filtering
// keyed by *InstanceType, so nothing may mutate a type after Build returns.
// Filtering returns a new Catalog sharing the same *InstanceType values.
package catalog

import (
	"fmt"
	"maps"
	"sort"
	"time"
)

// Capacity types, as used in the karpenter.sh/capacity-type label.
const (
	CapacityTypeOnDemand = "on-demand"
	CapacityTypeSpot     = "spot"
)

// Price sources recorded on each offering so a plan can say where its numbers came from.
const (
	PriceSourcePricingAPI  = "pricing-api"  // Pricing GetProducts / DescribeSpotPriceHistory
	PriceSourceAWSData     = "aws-data"     // a folder laid out like ../shared/aws-data
	PriceSourceEmbedded    = "embedded"     // the catalog compiled into the binary
	PriceSourceDerivedSpot = "derived-spot" // no spot feed: deterministic discount off on-demand
)

// Zone is an availability zone of the catalog's region.
type Zone struct {
	Name string `json:"name"` // us-east-1a
	ID   string `json:"id"`   // use1-az1
}

// GPU is one GPU model fitted to an instance type.
type GPU struct {
	Name         string `json:"name"`         // A10G
	Manufacturer string `json:"manufacturer"` // NVIDIA
	Count        int64  `json:"count"`
	MemoryMiB    int64  `json:"memoryMiB"` // per GPU
}

// Offering is one (zone, capacity type) an instance type can be launched in.
type Offering struct {
	Zone         string  `json:"zone"`
	ZoneID       string  `json:"zoneID"`
	CapacityType string  `json:"capacityType"` // on-demand | spot | reserved
	Price        float64 `json:"price"`        // $/hour
	Available    bool    `json:"available"`
	PriceSource  string  `json:"priceSource"`
	// The reservation of a reserved offering (see ForNodeClass):
	// ReservationCapacity is how many more instances it takes.
	ReservationID       string `json:"reservationID,omitempty"`
	ReservationType     string `json:"reservationType,omitempty"`
	ReservationCapacity int    `json:"reservationCapacity,omitempty"`
	Interruptible       bool   `json:"interruptible,omitempty"`
	// ReservationEnd is when the reservation ends (nil: no end date).
	ReservationEnd *time.Time `json:"reservationEnd,omitempty"`
}

// InstanceType is one EC2 instance type with its offerings in one region.
type InstanceType struct {
	Name         string `json:"name"`
	Architecture string `json:"architecture"` // Kubernetes name: amd64 | arm64
	VCPU         int64  `json:"vcpu"`
	MemoryMiB    int64  `json:"memoryMiB"`

	GPUs []GPU `json:"gpus,omitempty"`

	NeuronDevices   int64  `json:"neuronDevices,omitempty"`
	NeuronCores     int64  `json:"neuronCores,omitempty"`
	NeuronName      string `json:"neuronName,omitempty"`
	NeuronMemoryMiB int64  `json:"neuronMemoryMiB,omitempty"` // per device
	// Inference accelerators other than Neuron (e.g. Qualcomm AI 100 on dl2q).
	InferenceAccelerators            int64  `json:"inferenceAccelerators,omitempty"`
	InferenceAcceleratorName         string `json:"inferenceAcceleratorName,omitempty"`
	InferenceAcceleratorManufacturer string `json:"inferenceAcceleratorManufacturer,omitempty"`

	EFA int64 `json:"efa,omitempty"`
	// NetworkCards is how many network cards the type has (EFA-only
	// interfaces of an EC2NodeClass may sit on cards other than 0).
	NetworkCards int64 `json:"networkCards,omitempty"`
	// NestedVirtualization says the type can run nested virtual machines
	// (ProcessorInfo.SupportedFeatures).
	NestedVirtualization bool `json:"nestedVirtualization,omitempty"`
	// PlacementStrategies are the placement group strategies the type
	// supports (PlacementGroupInfo; empty: unknown, taken as all).
	PlacementStrategies []string `json:"placementStrategies,omitempty"`
	LocalNVMeGiB        int64    `json:"localNVMeGiB,omitempty"` // total instance-store size (GB as EC2 reports it)

	// ENI limits of the default network card (the only one the VPC CNI uses).
	MaxENIs    int64 `json:"maxENIs"`
	IPv4PerENI int64 `json:"ipv4PerENI"`

	NetworkBandwidthMbps int64    `json:"networkBandwidthMbps,omitempty"` // baseline, all cards
	EBSBandwidthMbps     int64    `json:"ebsBandwidthMbps,omitempty"`     // maximum, EBS-optimized by default only
	Hypervisor           string   `json:"hypervisor,omitempty"`           // nitro | xen | "" (bare metal)
	BareMetal            bool     `json:"bareMetal,omitempty"`
	CurrentGeneration    bool     `json:"currentGeneration,omitempty"`
	Generation           int      `json:"generation,omitempty"` // 5 for m5.large; 0 when the name has none
	Category             string   `json:"category,omitempty"`   // m
	Family               string   `json:"family"`               // m5
	Size                 string   `json:"size"`                 // large
	CPUManufacturer      string   `json:"cpuManufacturer,omitempty"`
	CPUClockMHz          int64    `json:"cpuClockMHz,omitempty"`
	EncryptionInTransit  bool     `json:"encryptionInTransit"`
	Burstable            bool     `json:"burstable,omitempty"`
	CapacityTypes        []string `json:"capacityTypes"` // supported usage classes: on-demand, spot

	Offerings []Offering `json:"offerings"`

	// Labels are the type-level labels every node of this type carries
	// (everything except zone, zone ID and capacity type, which come from
	// the offering, and karpenter.sh/nodepool, which the provisioner adds).
	// Read-only: shared by every copy of the catalog.
	Labels map[string]string `json:"labels"`
}

// GPUCount is the total number of GPUs of all models.
func (it *InstanceType) GPUCount() int64 {
	var n int64
	for _, g := range it.GPUs {
		n += g.Count
	}
	return n
}

// Offering returns the offering for zone and capacity type.
func (it *InstanceType) Offering(zone, capacityType string) (Offering, bool) {
	for _, o := range it.Offerings {
		if o.Zone == zone && o.CapacityType == capacityType {
			return o, true
		}
	}
	return Offering{}, false
}

// AvailableOfferings returns the offerings that can be launched now.
func (it *InstanceType) AvailableOfferings() []Offering {
	out := make([]Offering, 0, len(it.Offerings))
	for _, o := range it.Offerings {
		if o.Available {
			out = append(out, o)
		}
	}
	return out
}

// CheapestOffering returns the cheapest available offering accepted by keep
// (nil keeps all). Ties break by capacity type then zone so results are stable.
func (it *InstanceType) CheapestOffering(keep func(Offering) bool) (Offering, bool) {
	var best Offering
	found := false
	for _, o := range it.Offerings {
		if !o.Available || (keep != nil && !keep(o)) {
			continue
		}
		if !found || o.Price < best.Price ||
			(o.Price == best.Price && (o.CapacityType < best.CapacityType ||
				(o.CapacityType == best.CapacityType && o.Zone < best.Zone))) {
			best, found = o, true
		}
	}
	return best, found
}

// NodeLabels returns the full label set a node launched from this offering
// carries, without karpenter.sh/nodepool and the NodePool's own labels.
func (it *InstanceType) NodeLabels(o Offering) map[string]string {
	out := make(map[string]string, len(it.Labels)+3)
	for k, v := range it.Labels {
		out[k] = v
	}
	out[LabelTopologyZone] = o.Zone
	if o.ZoneID != "" {
		out[LabelTopologyZoneID] = o.ZoneID
	}
	out[LabelCapacityType] = o.CapacityType
	if o.CapacityType == CapacityTypeReserved {
		maps.Copy(out, ReservationLabels(o))
	}
	return out
}

// Catalog is the set of instance types of one region.
type Catalog struct {
	Region string          `json:"region"`
	Zones  []Zone          `json:"zones"`
	Types  []*InstanceType `json:"types"` // sorted by name

	byName map[string]*InstanceType
	// reservations are the capacity reservations per EC2NodeClass name
	// (WithReservations).
	reservations map[string][]Reservation
	// placementGroups are the placement groups per EC2NodeClass name
	// (WithPlacementGroups).
	placementGroups map[string]PlacementGroup
	// controller are the controller-wide allocatable settings
	// (WithControllerAllocatable).
	controller ControllerAllocatable
}

// New builds a catalog, sorting types by name and indexing them.
// It rejects duplicate names and offerings in zones the catalog does not list.
func New(region string, zones []Zone, types []*InstanceType) (*Catalog, error) {
	c := &Catalog{Region: region, Zones: append([]Zone(nil), zones...), Types: append([]*InstanceType(nil), types...)}
	sort.Slice(c.Zones, func(i, j int) bool { return c.Zones[i].Name < c.Zones[j].Name })
	sort.Slice(c.Types, func(i, j int) bool { return c.Types[i].Name < c.Types[j].Name })
	known := make(map[string]bool, len(zones))
	for _, z := range c.Zones {
		known[z.Name] = true
	}
	c.byName = make(map[string]*InstanceType, len(c.Types))
	for _, it := range c.Types {
		if it == nil || it.Name == "" {
			return nil, fmt.Errorf("catalog %s: instance type without a name", region)
		}
		if _, dup := c.byName[it.Name]; dup {
			return nil, fmt.Errorf("catalog %s: instance type %s listed twice", region, it.Name)
		}
		for _, o := range it.Offerings {
			if !known[o.Zone] {
				return nil, fmt.Errorf("catalog %s: instance type %s has an offering in unknown zone %q", region, it.Name, o.Zone)
			}
		}
		if it.Labels == nil {
			it.Labels = TypeLabels(it, region)
		}
		c.byName[it.Name] = it
	}
	return c, nil
}

// Get returns the instance type called name.
func (c *Catalog) Get(name string) (*InstanceType, bool) {
	if c.byName == nil {
		// A catalog decoded from JSON has no index; stay correct, if slower.
		for _, it := range c.Types {
			if it.Name == name {
				return it, true
			}
		}
		return nil, false
	}
	it, ok := c.byName[name]
	return it, ok
}

// NodePrice is what a node of type typ in zone costs per hour: its
// offering's price, or — for a zone the catalog does not list — the type's
// cheapest offering of that capacity type. ok is false when the catalog has
// neither.
func (c *Catalog) NodePrice(typ, zone, capacityType string) (price float64, ok bool) {
	it, found := c.Get(typ)
	if !found {
		return 0, false
	}
	if o, found := it.Offering(zone, capacityType); found {
		return o.Price, true
	}
	for _, o := range it.Offerings {
		if o.CapacityType == capacityType && (!ok || o.Price < price) {
			price, ok = o.Price, true
		}
	}
	return price, ok
}

// Zone returns the zone called name.
func (c *Catalog) Zone(name string) (Zone, bool) {
	for _, z := range c.Zones {
		if z.Name == name {
			return z, true
		}
	}
	return Zone{}, false
}

// derived is an empty catalog of c's region and zones, with room for n
// types, that keeps what c knows per EC2NodeClass.
func (c *Catalog) derived(n int) *Catalog {
	return &Catalog{Region: c.Region, Zones: c.Zones, Types: make([]*InstanceType, 0, n),
		byName: make(map[string]*InstanceType, n), reservations: c.reservations, placementGroups: c.placementGroups, controller: c.controller}
}

// Filter returns a catalog holding the types keep accepts. The types are
// shared, not copied.
func (c *Catalog) Filter(keep func(*InstanceType) bool) *Catalog {
	out := c.derived(0)
	for _, it := range c.Types {
		if keep(it) {
			out.Types = append(out.Types, it)
			out.byName[it.Name] = it
		}
	}
	return out
}

// Names returns the type names in catalog order.
func (c *Catalog) Names() []string {
	out := make([]string, len(c.Types))
	for i, it := range c.Types {
		out[i] = it.Name
	}
	return out
}

// WithUnavailable returns a catalog in which the offerings unavailable
// reports true for (e.g. the ICE cache) are marked unavailable. Types with no
// such offering are shared; affected types are copied, so the receiver is
// unchanged.
func (c *Catalog) WithUnavailable(unavailable func(instanceType, zone, capacityType string) bool) *Catalog {
	out := c.derived(len(c.Types))
	for _, it := range c.Types {
		cp := it
		for j, o := range it.Offerings {
			if o.Available && unavailable(it.Name, o.Zone, o.CapacityType) {
				if cp == it {
					dup := *it
					dup.Offerings = append([]Offering(nil), it.Offerings...)
					cp = &dup
				}
				cp.Offerings[j].Available = false
			}
		}
		out.Types = append(out.Types, cp)
		out.byName[cp.Name] = cp
	}
	return out
}
