package ec2sim

// Eventual consistency after a launch (rule launch-consistency). EC2's
// developer guide ("Eventual consistency in the Amazon EC2 API",
// https://docs.aws.amazon.com/ec2/latest/devguide/eventual-consistency.html)
// says a resource a call creates may not be visible at once to the calls
// that follow, with InvalidInstanceID.NotFound after RunInstances as its
// example, and gives no duration. Karpenter's provider meets the same
// NotFound from TerminateInstances and DescribeInstances and leaves such
// an instance to its garbage collector (pkg/providers/instance/instance.go,
// Delete, v1.14.1). The simulator hides each launched instance from
// DescribeInstances (by id: InvalidInstanceID.NotFound; by filter: absent)
// and from TerminateInstances (InvalidInstanceID.NotFound) for
// ConsistencyDelay of simulated time.

// revealLater makes an unseen instance visible after ConsistencyDelay.
func (c *Cloud) revealLater(inst *instance) {
	c.mu.Lock()
	unseen := inst.unseen
	c.mu.Unlock()
	if !unseen {
		return
	}
	c.cfg.After(c.cfg.ConsistencyDelay, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		inst.unseen = false
	})
}
