package localrun

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// scheduledEvent is what an EventBridge schedule rule delivers.
func scheduledEvent(region, account, rule string, now time.Time) map[string]any {
	return map[string]any{
		"version":     "0",
		"id":          fmt.Sprintf("%x", now.UnixNano()),
		"detail-type": "Scheduled Event",
		"source":      "aws.events",
		"account":     account,
		"time":        now.UTC().Format(time.RFC3339),
		"region":      region,
		"resources":   []string{fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", region, account, rule)},
		"detail":      map[string]any{},
	}
}

// schedule is an EventBridge schedule rule targeting f: every period until
// ctx ends it invokes f asynchronously, as EventBridge invokes Lambda, so a
// tick that finds the function busy waits in Lambda's queue (throttled and
// retried for the event's age) instead of being dropped here.
func schedule(ctx context.Context, wg *sync.WaitGroup, period time.Duration, region, account string, f *lambdaFunction) {
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				f.invokeAsync(ctx, wg, scheduledEvent(region, account, "nodewright-"+f.name+"-schedule", now))
			}
		}
	})
}
