package ec2sim

import (
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// RemoveSubnetTag deletes a tag from every subnet (as `aws ec2 delete-tags`
// would), for tests of what selects subnets by it; it returns how many
// subnets carried it.
func (c *Cloud) RemoveSubnetTag(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, s := range c.subnets {
		before := len(s.Tags)
		s.Tags = slices.DeleteFunc(s.Tags, func(t types.Tag) bool { return aws.ToString(t.Key) == key })
		if len(s.Tags) < before {
			n++
		}
	}
	return n
}
