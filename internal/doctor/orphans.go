package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// checkOtherOwners lists nodewright's instances for this cluster that
// another stack launched (their owner tag is another table's ARN). A stack
// running beside this one has its own; but deleting a stack leaves its
// running instances owned by a table no later stack owns, so no stack's
// garbage collector ever terminates them, and they cost until someone
// does. The check cannot tell the two apart, so it warns with the counts
// and the clean-up, never fails.
func (e *env) checkOtherOwners(ctx context.Context) {
	byOwner, err := e.instancesByOwner(ctx)
	if err != nil {
		e.warn("other-stacks-instances", "your credentials need ec2:DescribeInstances", "list nodewright's instances of cluster %s: %v", e.o.Cluster, err)
		return
	}
	delete(byOwner, e.owner())
	if len(byOwner) == 0 {
		e.pass("other-stacks-instances", "no nodewright instance of cluster %s belongs to another stack", e.o.Cluster)
		return
	}
	owners := make([]string, 0, len(byOwner))
	var all []string
	for o, ids := range byOwner {
		owners = append(owners, fmt.Sprintf("%s (%d: %s)", o, len(ids), strings.Join(ids, " ")))
		all = append(all, ids...)
	}
	sort.Strings(owners)
	sort.Strings(all)
	e.warn("other-stacks-instances",
		"if their stack was deleted, they are orphans no stack will terminate: drain their Nodes (kubectl drain), then aws ec2 terminate-instances --instance-ids "+strings.Join(all, " "),
		"%d nodewright instance(s) of cluster %s belong to another stack's table: %s", len(all), e.o.Cluster, strings.Join(owners, "; "))
}

// instancesByOwner is the live nodewright instances of this cluster by
// their owner tag.
func (e *env) instancesByOwner(ctx context.Context) (map[string][]string, error) {
	out := map[string][]string{}
	pager := ec2.NewDescribeInstancesPaginator(e.c.EC2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: sdkaws.String("tag-key"), Values: []string{nwaws.ClusterTagKey(e.o.Cluster)}},
		{Name: sdkaws.String("tag:" + nwaws.TagManagedBy), Values: []string{nwaws.ManagedBy}},
		{Name: sdkaws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped"}},
	}})
	for pager.HasMorePages() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				owner := "(no owner tag)"
				for _, t := range i.Tags {
					if sdkaws.ToString(t.Key) == nwaws.TagOwner {
						owner = sdkaws.ToString(t.Value)
					}
				}
				out[owner] = append(out[owner], sdkaws.ToString(i.InstanceId))
			}
		}
	}
	return out, nil
}
