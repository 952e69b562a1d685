package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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

// CompressBlob is the gzipped form a blob is stored in (before it is split
// into parts); name is the blob's key, for errors.
func CompressBlob(name string, data []byte) ([]byte, error) {
	z, err := gzipBytes(data)
	if err != nil {
		return nil, fmt.Errorf("put blob %s: compress: %w", name, err)
	}
	return z, nil
}

// ClaimBody is the JSON body a claim is stored as at version (its
// resourceVersion); nc is not modified.
func ClaimBody(nc *apis.NodeClaim, version int64) ([]byte, error) {
	if nc == nil || nc.Name == "" {
		return nil, errors.New("nodeclaim without a name")
	}
	c := *nc // shallow: only ResourceVersion differs and Marshal only reads
	c.ResourceVersion = strconv.FormatInt(version, 10)
	body, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode nodeclaim %s: %w", nc.Name, err)
	}
	return body, nil
}

// OneClaimOfInstance is GetNodeClaimByInstanceID's answer from the live
// claims found for instanceID: ErrNotFound for none, and an error naming
// them for more than one (two live claims pointing at one instance is a
// bug somewhere else; say so rather than pick one silently).
func OneClaimOfInstance(instanceID string, found []*apis.NodeClaim) (*apis.NodeClaim, error) {
	if len(found) == 0 {
		return nil, fmt.Errorf("get nodeclaim by instance %s: %w", instanceID, ErrNotFound)
	}
	if len(found) > 1 {
		names := make([]string, len(found))
		for i, c := range found {
			names[i] = c.Name
		}
		return nil, fmt.Errorf("get nodeclaim by instance %s: %d live claims %v", instanceID, len(found), names)
	}
	return found[0], nil
}
