package localrun

import (
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// Instance is what a person watching the local cloud wants of one EC2
// instance, priced at the simulator's prices.
type Instance struct {
	ID, Type, Zone, CapacityType, State string
	// Price is the hourly price: the pool's spot price for spot, the
	// on-demand price otherwise.
	Price float64
}

// Live reports whether the instance still runs (and costs).
func (i Instance) Live() bool { return i.State != string(ec2types.InstanceStateNameTerminated) }

// Instances lists the simulator's instances in launch order.
func Instances(sim *ec2sim.Cloud) []Instance {
	var out []Instance
	for _, in := range sim.Instances() {
		id := sdkaws.ToString(in.InstanceId)
		_, capacity, _ := sim.Instance(id)
		v := Instance{ID: id, Type: string(in.InstanceType), CapacityType: capacity}
		if in.Placement != nil {
			v.Zone = sdkaws.ToString(in.Placement.AvailabilityZone)
		}
		if in.State != nil {
			v.State = string(in.State.Name)
		}
		if capacity == "spot" {
			v.Price, _ = sim.SpotPrice(v.Type, v.Zone)
		} else {
			v.Price, _ = sim.OnDemandPrice(v.Type)
		}
		out = append(out, v)
	}
	return out
}
