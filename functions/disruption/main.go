// Command disruption is the disruption Lambda function: on its schedule,
// and when the disruption queue delivers one of its own wake-ups (a
// candidate's consolidateAfter or a decision's validation delay running out
// before the next tick), it runs one disruption pass (emptiness, drift,
// consolidation, re-pack) under the disruption lease. Malformed queue
// messages are reported as batch item failures so the queue's redrive
// policy parks them in the DLQ.
package main

import "github.com/nodewright/nodewright/internal/app"

func main() {
	app.Run("disruption", (*app.App).DisruptionFunction)
}
