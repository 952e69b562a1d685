// Command disruption is the disruption Lambda function: on its schedule it
// runs one disruption pass (emptiness, drift, consolidation, re-pack) under
// the disruption lease.
package main

import "github.com/nodewright/nodewright/internal/app"

func main() {
	app.Run("disruption", (*app.App).DisruptionHandler)
}
