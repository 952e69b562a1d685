package awssim

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/ec2sim"
)

// simClock is a settable clock the buckets refill from.
type simClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *simClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *simClock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// throttledServer is a test server whose buckets are th and refill from
// the returned clock alone.
func throttledServer(t *testing.T, th ec2sim.Throttle) (*Server, *ec2.Client, *simClock) {
	clock := &simClock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	s, cfg := newTestServer(t, func(o *Options) { o.Now, o.Throttle = clock.Now, th })
	return s, ec2.NewFromConfig(cfg), clock
}

// isRequestLimit: EC2's answer to a throttled call (HTTP 503).
func isRequestLimit(err error) bool {
	var re *awshttp.ResponseError
	return apiCode(err) == "RequestLimitExceeded" && errors.As(err, &re) && re.HTTPStatusCode() == http.StatusServiceUnavailable
}

// TestRuleRequestThrottling: calls past an action's request bucket, and
// instances past RunInstances' resource bucket, answer RequestLimitExceeded
// and launch nothing, until the bucket refills; other actions and filtered
// reads keep their own buckets.
func TestRuleRequestThrottling(t *testing.T) {
	t.Run("request bucket", func(t *testing.T) {
		s, c, clock := throttledServer(t, ec2sim.Throttle{Mutating: ec2sim.Bucket{Capacity: 1, Refill: 1}})
		lt := launchTemplate(t, s, c, "lt-throttle", "")
		if n, codes := fleetErrorCodes(t, c, newFleet(lt)); n != 1 {
			t.Fatalf("first fleet: %d launched, errors %v", n, codes)
		}
		if _, err := c.CreateFleet(ctx(t), newFleet(lt)); !isRequestLimit(err) {
			t.Fatalf("second fleet in the same second past a 1-token bucket: %v, want 503 RequestLimitExceeded", err)
		}
		if got := len(s.EC2().Instances()); got != 1 {
			t.Errorf("a throttled fleet launched: %d instances, want 1", got)
		}
		clock.Advance(time.Second)
		if n, codes := fleetErrorCodes(t, c, newFleet(lt)); n != 1 || len(s.EC2().Instances()) != 2 {
			t.Errorf("after a second's refill: %d launched, errors %v", n, codes)
		}
	})
	t.Run("resource bucket", func(t *testing.T) {
		s, c, clock := throttledServer(t, ec2sim.Throttle{LaunchResource: ec2sim.Bucket{Capacity: 1, Refill: 0.5}})
		lt := launchTemplate(t, s, c, "lt-throttle-res", "")
		if n, codes := fleetErrorCodes(t, c, newFleet(lt)); n != 1 {
			t.Fatalf("first fleet: %d launched, errors %v", n, codes)
		}
		if _, err := c.CreateFleet(ctx(t), newFleet(lt)); !isRequestLimit(err) {
			t.Fatalf("an instance past a 1-instance resource bucket: %v, want RequestLimitExceeded", err)
		}
		clock.Advance(2 * time.Second)
		if n, codes := fleetErrorCodes(t, c, newFleet(lt)); n != 1 || len(s.EC2().Instances()) != 2 {
			t.Errorf("after refilling one token: %d launched, errors %v, %d instances", n, codes, len(s.EC2().Instances()))
		}
	})
	t.Run("unfiltered describe", func(t *testing.T) {
		_, c, _ := throttledServer(t, ec2sim.Throttle{Unfiltered: ec2sim.Bucket{Capacity: 1, Refill: 1}})
		if _, err := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.DescribeInstances(ctx(t), &ec2.DescribeInstancesInput{}); !isRequestLimit(err) {
			t.Fatalf("second unfiltered DescribeInstances: %v, want RequestLimitExceeded", err)
		}
		filtered := &ec2.DescribeInstancesInput{Filters: []types.Filter{{Name: awsString("instance-state-name"), Values: []string{"running"}}}}
		if _, err := c.DescribeInstances(ctx(t), filtered); err != nil {
			t.Errorf("a filtered DescribeInstances draws from the larger bucket: %v", err)
		}
	})
}

func awsString(s string) *string { return &s }

// newFleet is a one-instance on-demand fleet request; each is a new one
// (the SDK writes the ClientToken it generates into the input, and a
// reused input is a replay, which launches nothing).
func newFleet(lt string) *ec2.CreateFleetInput {
	return fleetInput(lt, types.DefaultTargetCapacityTypeOnDemand, override("m5.large", "us-west-2a"))
}
