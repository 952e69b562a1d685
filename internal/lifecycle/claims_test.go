package lifecycle_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/lifecycle"
)

// newEnvWithController is newEnv with a controller and a handler over one
// set of its deps, for tests that reconcile claims one by one and also run
// passes or work messages.
func newEnvWithController(t testing.TB, opts ...envOpt) (*env, *lifecycle.Controller, *lifecycle.Handler) {
	t.Helper()
	e := newEnv(t, opts...)
	d := e.deps()
	return e, e.newController(d), e.handler(d)
}

// initializedClaim launches a claim named name (plus the env's suffix) and
// drives it through c to an initialized node.
func (e *env) initializedClaim(c *lifecycle.Controller, name string) (*apis.NodeClaim, *corev1.Node) {
	e.t.Helper()
	return e.initialized(c, e.launchClaim(name).Name)
}

// busyClaim is initializedClaim with the pod web-1 (app=web) running on the
// node.
func (e *env) busyClaim(c *lifecycle.Controller, name string) (*apis.NodeClaim, *corev1.Node) {
	e.t.Helper()
	cl, node := e.initializedClaim(c, name)
	e.runningPod("web-1", node.Name, nil)
	return cl, node
}
