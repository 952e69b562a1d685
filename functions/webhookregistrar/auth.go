package main

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// defaultAuthWait bounds how long the registrar retries calls the API
// server refuses as Unauthorized or Forbidden. CloudFormation creates the
// registrar's access entry just before the custom resources, and EKS may
// not honour a new entry at once (its authenticator and authorizer pick
// entries up asynchronously); failing the custom resource on that first
// refusal would roll the whole deployment back. 90 s stays inside the
// registrar's 120 s timeout with room for the call itself.
const defaultAuthWait = 90 * time.Second

// untilAuthorized runs op, retrying with backoff while the API server
// refuses it as Unauthorized or Forbidden, for up to the registrar's auth
// wait. Any other error, and the last refusal, is returned as is.
func (r *registrar) untilAuthorized(ctx context.Context, what string, op func() error) error {
	wait := r.authWait
	if wait <= 0 {
		wait = defaultAuthWait
	}
	deadline := time.Now().Add(wait)
	delay := r.authRetry
	if delay <= 0 {
		delay = time.Second
	}
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || (!apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err)) {
			return err
		}
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("%s: still refused after %d attempts over %s (the registrar's access entry has not propagated, or lacks cluster-admin): %w", what, attempt, wait, err)
		}
		r.log.Warn("API server refused the registrar; retrying while its access entry propagates", "operation", what, "attempt", attempt, "error", err.Error())
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: %w (last refusal: %w)", what, ctx.Err(), err)
		case <-t.C:
		}
		delay = min(2*delay, 15*time.Second)
	}
}
