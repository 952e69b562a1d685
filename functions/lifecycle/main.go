// Command lifecycle is the lifecycle Lambda: ticked every minute by an
// EventBridge schedule and fed delayed work through the SQS work queue, it
// registers and initializes nodes, enforces launch/registration timeouts and
// expiration, deletes empty nodes of WhenEmpty pools, drains and terminates
// NodeClaims marked for deletion, and garbage collects instances and Nodes.
package main

import "github.com/nodewright/nodewright/internal/app"

func main() {
	app.Run("lifecycle", (*app.App).LifecycleHandler)
}
