package ec2sim

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/fidelity"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Every bucket size and refill rate below is from the EC2 developer guide,
// "Request throttling for the Amazon EC2 API",
// https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-throttling.html
// (the page): EC2 throttles each account per Region with token buckets, one
// per API action (request tokens) and, for a few actions, one per action
// counting the resources a request touches (resource tokens).

// Bucket is one token bucket: it holds Capacity tokens at most and gains
// Refill tokens a second.
type Bucket struct{ Capacity, Refill float64 }

// Throttle sizes the region's buckets. A zero field takes the documented
// size (DefaultThrottle); tests set small ones to reach the limit quickly.
type Throttle struct {
	// NonMutating is Describe*, List*, Search*, Get* (page: 100, 20/s).
	NonMutating Bucket
	// Unfiltered is DescribeInstances, DescribeSecurityGroups, ... called
	// with neither a filter nor pagination (page: 50, 10/s).
	Unfiltered Bucket
	// Mutating is every other action (page: 50, 5/s).
	Mutating Bucket
	// Actions are the page's "uncategorized actions" with their own bucket.
	Actions map[string]Bucket
	// LaunchResource is RunInstances' resource bucket, one token per
	// instance launched (page: 1000, 2/s); TerminateResource is
	// TerminateInstances', one per instance (page: 1000, 20/s).
	LaunchResource, TerminateResource Bucket
}

// DefaultThrottle is the page's table for the actions the simulator serves
// ("Request token bucket sizes and refill rates" and
// "Resource token bucket sizes and refill rates").
func DefaultThrottle() Throttle {
	return Throttle{
		NonMutating: Bucket{100, 20},
		Unfiltered:  Bucket{50, 10},
		Mutating:    Bucket{50, 5},
		Actions: map[string]Bucket{
			"RunInstances":       {5, 2},
			"TerminateInstances": {100, 5},
			"CreateTags":         {100, 10},
		},
		LaunchResource:    Bucket{1000, 2},
		TerminateResource: Bucket{1000, 20},
	}
}

// withDefaults fills t's zero buckets from DefaultThrottle.
func (t Throttle) withDefaults() Throttle {
	d := DefaultThrottle()
	for _, p := range []struct{ v, def *Bucket }{
		{&t.NonMutating, &d.NonMutating}, {&t.Unfiltered, &d.Unfiltered}, {&t.Mutating, &d.Mutating},
		{&t.LaunchResource, &d.LaunchResource}, {&t.TerminateResource, &d.TerminateResource},
	} {
		if *p.v == (Bucket{}) {
			*p.v = *p.def
		}
	}
	actions := map[string]Bucket{}
	for k, v := range d.Actions {
		actions[k] = v
	}
	for k, v := range t.Actions {
		actions[k] = v
	}
	t.Actions = actions
	return t
}

// unfilteredActions are the page's "unfiltered and unpaginated
// non-mutating actions" (of those the simulator serves).
var unfilteredActions = map[string]bool{"DescribeInstances": true, "DescribeSecurityGroups": true}

// Resource bucket keys.
const (
	launchResource    = "resource/RunInstances"
	terminateResource = "resource/TerminateInstances"
)

// throttler holds the region's buckets: one Cloud is one account in one
// Region, which is the scope EC2 throttles in.
type throttler struct {
	mu      sync.Mutex
	limits  Throttle
	now     func() time.Time
	buckets map[string]*tokens
}

type tokens struct {
	left float64
	at   time.Time
}

func newThrottler(t Throttle, now func() time.Time) *throttler {
	return &throttler{limits: t.withDefaults(), now: now, buckets: map[string]*tokens{}}
}

// take removes n tokens from the bucket key (sized b) if it holds them.
// Buckets start full and refill continuously from the simulated clock.
func (th *throttler) take(key string, b Bucket, n float64) bool {
	th.mu.Lock()
	defer th.mu.Unlock()
	now := th.now()
	tk, ok := th.buckets[key]
	if !ok {
		tk = &tokens{left: b.Capacity, at: now}
		th.buckets[key] = tk
	}
	if dt := now.Sub(tk.at).Seconds(); dt > 0 {
		tk.left = min(b.Capacity, tk.left+dt*b.Refill)
		tk.at = now
	}
	if tk.left < n {
		return false
	}
	tk.left -= n
	return true
}

// requestBucket is the request bucket an action's call draws from.
func (th *throttler) requestBucket(action string, form url.Values) (string, Bucket) {
	if b, ok := th.limits.Actions[action]; ok {
		return action, b
	}
	if !nonMutating(action) {
		return action, th.limits.Mutating
	}
	if unfilteredActions[action] && !filteredOrPaginated(form) {
		return action + "/unfiltered", th.limits.Unfiltered
	}
	return action, th.limits.NonMutating
}

func nonMutating(action string) bool {
	for _, p := range []string{"Describe", "List", "Search", "Get"} {
		if strings.HasPrefix(action, p) {
			return true
		}
	}
	return false
}

// filteredOrPaginated: the page names a filter or pagination; instance ids
// are neither, so a DescribeInstances by id alone takes the smaller bucket.
func filteredOrPaginated(form url.Values) bool {
	for k := range form {
		if strings.HasPrefix(k, "Filter.") || k == "MaxResults" || k == "NextToken" {
			return true
		}
	}
	return false
}

// errRequestLimit is what EC2 answers a throttled call: HTTP 503,
// RequestLimitExceeded, "Request limit exceeded." (as the SDKs report it).
func errRequestLimit() *protocol.APIError {
	return &protocol.APIError{Code: "RequestLimitExceeded", Message: "Request limit exceeded.", Status: http.StatusServiceUnavailable}
}

// throttleRequest charges one request token of the action.
func (c *Cloud) throttleRequest(action string, form url.Values) error {
	if !c.cfg.Rules.On(fidelity.RequestThrottling) {
		return nil
	}
	key, b := c.throttle.requestBucket(action, form)
	if !c.throttle.take(key, b, 1) {
		return errRequestLimit()
	}
	return nil
}

// throttleResources charges n resource tokens (instances launched or
// terminated); a request short of them fails whole, nothing done.
func (c *Cloud) throttleResources(key string, n int) error {
	if !c.cfg.Rules.On(fidelity.RequestThrottling) || n <= 0 {
		return nil
	}
	b := c.throttle.limits.LaunchResource
	if key == terminateResource {
		b = c.throttle.limits.TerminateResource
	}
	if !c.throttle.take(key, b, float64(n)) {
		return errRequestLimit()
	}
	return nil
}
