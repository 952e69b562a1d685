// Command provisioner is the provisioner Lambda: nudged through the
// provision queue by the admission webhook and ticked every minute by an
// EventBridge schedule, it turns pending pods into NodeClaims and instances.
package main

import "github.com/nodewright/nodewright/internal/app"

func main() {
	app.Run("provisioner", (*app.App).ProvisionerHandler)
}
