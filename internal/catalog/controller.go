package catalog

import (
	"github.com/nodewright/nodewright/internal/apis"
)

// ControllerAllocatable are the controller-wide settings that change what a
// new node is planned to offer, as Karpenter's flags of the same names do
// (--vm-memory-overhead-percent, --reserved-enis; settings.vmMemoryOverheadPercent
// and settings.reservedENIs in its Helm chart). The zero value is Karpenter's
// defaults (7.5 %, no reserved ENIs).
type ControllerAllocatable struct {
	// VMMemoryOverheadPercent nil means DefaultVMMemoryOverheadPercent.
	VMMemoryOverheadPercent *float64
	ReservedENIs            int
}

// WithControllerAllocatable returns the catalog with the controller's
// allocatable settings, which OptionsFor applies to every node class; the
// receiver is unchanged. Catalogs derived from the result keep them.
func (c *Catalog) WithControllerAllocatable(s ControllerAllocatable) *Catalog {
	out := *c
	out.controller = s
	return &out
}

// OptionsFor is the allocatable options of a node of the EC2NodeClass nc
// (nil: defaults) planned from this catalog: the class's own
// (OptionsForNodeClass) with the controller's settings. Every place that
// computes a new node's allocatable, max pods or capacity uses it, so the
// solver, the claim records and the launch template agree.
func (c *Catalog) OptionsFor(nc *apis.EC2NodeClass) AllocatableOptions {
	o := OptionsForNodeClass(nc)
	o.VMMemoryOverheadPercent = c.controller.VMMemoryOverheadPercent
	o.ReservedENIs = c.controller.ReservedENIs
	return o
}
