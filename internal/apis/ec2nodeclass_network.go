package apis

// Types of the EC2NodeClass fields Karpenter added after v1.0: capacity
// reservations, placement groups, network interfaces, connection tracking
// and CPU options.

// CapacityReservationSelectorTerm selects capacity reservations by id, or by
// owner, instance match criteria and tags (ANDed).
type CapacityReservationSelectorTerm struct {
	ID string `json:"id,omitempty"`
	// OwnerID is the 12-digit account that owns a shared reservation.
	OwnerID string `json:"ownerID,omitempty"`
	// InstanceMatchCriteria is "open" (any matching launch uses it) or
	// "targeted" (only launches that name it).
	InstanceMatchCriteria string            `json:"instanceMatchCriteria,omitempty"`
	Tags                  map[string]string `json:"tags,omitempty"`
}

// PlacementGroupSelector selects a placement group by name or by id.
type PlacementGroupSelector struct {
	Name *string `json:"name,omitempty"`
	ID   *string `json:"id,omitempty"`
}

// Network interface types of spec.networkInterfaces.
const (
	InterfaceTypeInterface = "interface"
	InterfaceTypeEFAOnly   = "efa-only"
)

// NetworkInterface is one interface of the launch template. All three fields
// are required; they are pointers so a missing one can be reported.
type NetworkInterface struct {
	NetworkCardIndex *int32 `json:"networkCardIndex"`
	DeviceIndex      *int32 `json:"deviceIndex"`
	InterfaceType    string `json:"interfaceType"`
}

// isPrimary reports whether ni is the instance's primary interface (card 0,
// device 0, a regular interface), which a layout must include.
func (ni *NetworkInterface) isPrimary() bool {
	return ni.NetworkCardIndex != nil && *ni.NetworkCardIndex == 0 &&
		ni.DeviceIndex != nil && *ni.DeviceIndex == 0 && ni.InterfaceType == InterfaceTypeInterface
}

// ConnectionTracking holds idle timeouts in seconds; EC2's defaults apply to
// the ones left unset.
type ConnectionTracking struct {
	// TCPEstablishedTimeout is for idle established TCP connections (60..432000).
	TCPEstablishedTimeout *int32 `json:"tcpEstablishedTimeout,omitempty"`
	// UDPStreamTimeout is for idle UDP flows seen in both directions (60..180).
	UDPStreamTimeout *int32 `json:"udpStreamTimeout,omitempty"`
	// UDPTimeout is for idle one-way or single-exchange UDP flows (30..60).
	UDPTimeout *int32 `json:"udpTimeout,omitempty"`
}

// NestedVirtualization reports whether the class asks for nested
// virtualization, which only some instance types support.
func (nc *EC2NodeClass) NestedVirtualization() bool {
	c := nc.Spec.CPUOptions
	return c != nil && c.NestedVirtualization != nil && *c.NestedVirtualization == "enabled"
}

// CPUOptions are the CPU settings of the launched instances.
type CPUOptions struct {
	// NestedVirtualization is "enabled" or "disabled"; enabled limits the
	// instance types to those that support it.
	NestedVirtualization *string `json:"nestedVirtualization,omitempty"`
}
