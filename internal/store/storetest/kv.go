package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

type kvRec struct {
	value     []byte
	version   int64
	expiresAt int64 // unix seconds; 0: never
}

func (r *kvRec) kv(k string) *store.KV {
	out := &store.KV{Key: k, Value: append([]byte(nil), r.value...), Version: r.version}
	if r.expiresAt != 0 {
		out.ExpiresAt = time.Unix(r.expiresAt, 0)
	}
	return out
}

// GetKV is store.Store.GetKV.
func (s *Store) GetKV(ctx context.Context, k string) (*store.KV, error) {
	if err := s.begin(ctx, "GetKV", "get kv "+k); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec := s.kv[k]
	if rec == nil {
		return nil, fmt.Errorf("get kv %s: %w", k, store.ErrNotFound)
	}
	if s.expired(rec.expiresAt) {
		return nil, fmt.Errorf("get kv %s: %w (expired)", k, store.ErrNotFound)
	}
	return rec.kv(k), nil
}

// ListKV is store.Store.ListKV: unexpired values under prefix, by key.
func (s *Store) ListKV(ctx context.Context, prefix string) ([]*store.KV, error) {
	if err := s.begin(ctx, "ListKV", fmt.Sprintf("list kv %q", prefix)); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k, rec := range s.kv {
		if strings.HasPrefix(k, prefix) && !s.expired(rec.expiresAt) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []*store.KV
	for _, k := range keys {
		out = append(out, s.kv[k].kv(k))
	}
	return out, nil
}

// PutKV is store.Store.PutKV: expectedVersion 0 creates (over an absent or
// expired value), otherwise the live value must be at expectedVersion.
func (s *Store) PutKV(ctx context.Context, k string, value []byte, expectedVersion int64, ttl time.Duration) (int64, error) {
	if err := s.begin(ctx, "PutKV", "put kv "+k); err != nil {
		return 0, err
	}
	if k == "" {
		return 0, errors.New("put kv: empty key")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	cur := s.kv[k]
	var ok bool
	if expectedVersion == 0 {
		// An item without a TTL never satisfies the real "#exp <= :now".
		ok = cur == nil || (cur.expiresAt != 0 && cur.expiresAt <= now.Unix())
	} else {
		ok = cur != nil && cur.version == expectedVersion && (cur.expiresAt == 0 || cur.expiresAt > now.Unix())
	}
	if !ok {
		return 0, fmt.Errorf("put kv %s (expected version %d): %w", k, expectedVersion, store.ErrConflict)
	}
	rec := &kvRec{value: append([]byte(nil), value...), version: expectedVersion + 1}
	if ttl > 0 {
		rec.expiresAt = now.Add(ttl).Unix()
	}
	s.kv[k] = rec
	return rec.version, nil
}

// DeleteKV is store.Store.DeleteKV: conditional on the version only (an
// expired value at that version is deleted too; an absent one conflicts).
func (s *Store) DeleteKV(ctx context.Context, k string, expectedVersion int64) error {
	if err := s.begin(ctx, "DeleteKV", "delete kv "+k); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur := s.kv[k]; cur == nil || cur.version != expectedVersion {
		return fmt.Errorf("delete kv %s (expected version %d): %w", k, expectedVersion, store.ErrConflict)
	}
	delete(s.kv, k)
	return nil
}
