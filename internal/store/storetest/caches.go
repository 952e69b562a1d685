package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

// MarkUnavailable is store.Store.MarkUnavailable: a longer-lasting mark is
// never shortened.
func (s *Store) MarkUnavailable(ctx context.Context, o store.Offering, until time.Time, reason string) error {
	if err := s.begin(ctx, "MarkUnavailable", "mark "+o.String()+" unavailable"); err != nil {
		return err
	}
	if err := store.ValidateOffering(o); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cur, ok := s.ice[o]; ok && cur.Until.UnixMilli() >= until.UnixMilli() {
		return nil
	}
	s.ice[o] = store.Unavailable{Offering: o, Until: time.UnixMilli(until.UnixMilli()), Reason: reason}
	return nil
}

// UnavailableOfferings is store.Store.UnavailableOfferings.
func (s *Store) UnavailableOfferings(ctx context.Context) (map[store.Offering]store.Unavailable, error) {
	if err := s.begin(ctx, "UnavailableOfferings", "list unavailable offerings"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now().UnixMilli()
	out := map[store.Offering]store.Unavailable{}
	for o, u := range s.ice {
		if u.Until.UnixMilli() > now {
			out[o] = u
		}
	}
	return out, nil
}

// allocRec keeps the resource lists as JSON, as the real item does.
type allocRec struct {
	instanceType, variant, nodeName string
	capacity, allocatable           []byte
	observedAtMs                    int64
}

// RecordObservedCapacity is store.Store.RecordObservedCapacity: an older
// observation never replaces a newer one.
func (s *Store) RecordObservedCapacity(ctx context.Context, o store.ObservedCapacity) error {
	if err := s.begin(ctx, "RecordObservedCapacity", "record observed capacity of "+o.InstanceType); err != nil {
		return err
	}
	if o.InstanceType == "" || strings.Contains(o.InstanceType, "#") {
		return fmt.Errorf("record observed capacity: invalid instance type %q", o.InstanceType)
	}
	if len(o.Allocatable) == 0 {
		return fmt.Errorf("record observed capacity of %s: empty allocatable", o.InstanceType)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o.ObservedAt.IsZero() {
		o.ObservedAt = s.now()
	}
	rec := &allocRec{instanceType: o.InstanceType, variant: o.Variant, nodeName: o.NodeName, observedAtMs: o.ObservedAt.UnixMilli()}
	var err1, err2 error
	rec.capacity, err1 = json.Marshal(o.Capacity)
	rec.allocatable, err2 = json.Marshal(o.Allocatable)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("record observed capacity of %s: %w", o.InstanceType, err)
	}
	k := o.InstanceType + "#" + o.Variant
	if cur := s.alloc[k]; cur != nil && cur.observedAtMs > rec.observedAtMs {
		return nil // a newer observation is stored
	}
	s.alloc[k] = rec
	return nil
}

// ObservedCapacities is store.Store.ObservedCapacities: by type and variant.
func (s *Store) ObservedCapacities(ctx context.Context) ([]store.ObservedCapacity, error) {
	if err := s.begin(ctx, "ObservedCapacities", "list observed capacities"); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.ObservedCapacity
	for _, r := range s.alloc {
		o := store.ObservedCapacity{InstanceType: r.instanceType, Variant: r.variant, NodeName: r.nodeName, ObservedAt: time.UnixMilli(r.observedAtMs)}
		if err := errors.Join(json.Unmarshal(r.capacity, &o.Capacity), json.Unmarshal(r.allocatable, &o.Allocatable)); err != nil {
			return nil, fmt.Errorf("list observed capacities: %w", err)
		}
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].InstanceType != out[j].InstanceType {
			return out[i].InstanceType < out[j].InstanceType
		}
		return out[i].Variant < out[j].Variant
	})
	return out, nil
}

// blobPartSize is the real store's part size: BlobInfo.Parts reports how
// many parts the gzipped blob would take.
const blobPartSize = 300 << 10

type blobRec struct {
	data        []byte
	fetchedAtMs int64
	parts       int
}

// PutBlob is store.Store.PutBlob. Writers are serialised, so the fake never
// reports the real store's ErrConflict for a lost race.
func (s *Store) PutBlob(ctx context.Context, name string, data []byte, fetchedAt time.Time) error {
	if err := s.begin(ctx, "PutBlob", "put blob "+name); err != nil {
		return err
	}
	return s.putBlob(name, data, fetchedAt)
}

func (s *Store) putBlob(name string, data []byte, fetchedAt time.Time) error {
	if name == "" {
		return errors.New("put blob: empty key")
	}
	zipped, err := store.CompressBlob(name, data)
	if err != nil {
		return err
	}
	parts := max(1, (len(zipped)+blobPartSize-1)/blobPartSize)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.blobs[name] = &blobRec{data: append([]byte(nil), data...), fetchedAtMs: fetchedAt.UnixMilli(), parts: parts}
	return nil
}

// GetBlob is store.Store.GetBlob.
func (s *Store) GetBlob(ctx context.Context, name string) ([]byte, store.BlobInfo, error) {
	if err := s.begin(ctx, "GetBlob", "get blob "+name); err != nil {
		return nil, store.BlobInfo{}, err
	}
	return s.getBlob(name)
}

func (s *Store) getBlob(name string) ([]byte, store.BlobInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.blobs[name]
	if b == nil {
		return nil, store.BlobInfo{}, fmt.Errorf("get blob %s: %w", name, store.ErrNotFound)
	}
	info := store.BlobInfo{FetchedAt: time.UnixMilli(b.fetchedAtMs), Size: len(b.data), Parts: b.parts}
	return append([]byte(nil), b.data...), info, nil
}

// PutJSON is store.Store.PutJSON.
func (s *Store) PutJSON(ctx context.Context, name string, v any, fetchedAt time.Time) error {
	if err := s.begin(ctx, "PutJSON", "put blob "+name); err != nil {
		return err
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("put blob %s: encode: %w", name, err)
	}
	return s.putBlob(name, b, fetchedAt)
}

// GetJSON is store.Store.GetJSON.
func (s *Store) GetJSON(ctx context.Context, name string, v any) (time.Time, error) {
	if err := s.begin(ctx, "GetJSON", "get blob "+name); err != nil {
		return time.Time{}, err
	}
	b, info, err := s.getBlob(name)
	if err != nil {
		return time.Time{}, err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return time.Time{}, fmt.Errorf("get blob %s: decode: %w", name, err)
	}
	return info.FetchedAt, nil
}
