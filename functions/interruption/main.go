// Command interruption is the interruption Lambda: fed by the interruption
// SQS queue (EventBridge rules for EC2 spot interruption warnings, rebalance
// recommendations, instance state changes and AWS Health scheduled changes),
// it marks interrupted spot offerings unavailable, launches replacement
// capacity at once, then cordons, taints and drains the node through the
// termination workflow. Malformed messages are reported as batch item
// failures so the queue's redrive policy parks them in the DLQ.
package main

import "github.com/nodewright/nodewright/internal/app"

func main() {
	app.Run("interruption", (*app.App).InterruptionHandler)
}
