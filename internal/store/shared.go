package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
)

// The rules below are exported for storetest's in-memory store, so that it
// applies the very rules this store does rather than a copy of them.

// VersionOf returns the version a claim was read at (its resourceVersion);
// a claim never read from a store has none, which is an error.
func VersionOf(nc *apis.NodeClaim) (int64, error) { return versionOf(nc) }

// ValidateLeaseArgs checks a lease call's name, holder and duration.
func ValidateLeaseArgs(name, holder string, d time.Duration) error {
	return validateLeaseArgs(name, holder, d)
}

// MutateWith is MutateNodeClaim over any get and conditional update: it
// applies fn to the latest version of the claim and writes it, re-reading
// and re-applying on ErrConflict (up to 8 attempts, with jittered backoff).
// An error from fn aborts without writing.
func MutateWith(ctx context.Context, name string, fn func(*apis.NodeClaim) error,
	get func(ctx context.Context, name string) (*apis.NodeClaim, error),
	update func(ctx context.Context, nc *apis.NodeClaim) error,
) (*apis.NodeClaim, error) {
	const attempts = 8
	for i := 0; ; i++ {
		nc, err := get(ctx, name)
		if err != nil {
			return nil, err
		}
		if err := fn(nc); err != nil {
			return nil, fmt.Errorf("mutate nodeclaim %s: %w", name, err)
		}
		nc.Name = name
		err = update(ctx, nc)
		if err == nil {
			return nc, nil
		}
		if !errors.Is(err, ErrConflict) || i+1 >= attempts {
			return nil, err
		}
		// Jitter so racing writers do not collide again in lockstep.
		backoff := time.Duration(1+rand.IntN(10<<i)) * time.Millisecond
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
	}
}
