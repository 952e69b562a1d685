package awssim

import "github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"

type kubeletEmu struct{}

func (k *kubeletEmu) observe(ec2sim.Transition) {}
