package storetest

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/store"
)

func (c *contract) getKV(t *testing.T, k string) *store.KV {
	t.Helper()
	kv, err := c.s.GetKV(c.ctx, k)
	must(t, err)
	return kv
}

func (c *contract) putKV(t *testing.T, k, value string, expected int64, ttl time.Duration) int64 {
	t.Helper()
	v, err := c.s.PutKV(c.ctx, k, []byte(value), expected, ttl)
	must(t, err)
	return v
}

// kvVersions: version 0 creates, a write names the version it replaces,
// and values are copied in and out.
func kvVersions(t *testing.T, c *contract) {
	value := []byte("a")
	if v, err := c.s.PutKV(c.ctx, "k", value, 0, 0); err != nil || v != 1 {
		t.Fatalf("create: %d %v", v, err)
	}
	value[0] = 'x'
	_, err := c.s.PutKV(c.ctx, "k", []byte("b"), 0, 0)
	wantIs(t, "second create", err, store.ErrConflict)
	if v := c.putKV(t, "k", "b", 1, 0); v != 2 {
		t.Fatalf("update to version %d, want 2", v)
	}
	_, err = c.s.PutKV(c.ctx, "k", []byte("c"), 1, 0)
	wantIs(t, "stale update", err, store.ErrConflict)
	kv := c.getKV(t, "k")
	if kv.Key != "k" || string(kv.Value) != "b" || kv.Version != 2 || !kv.ExpiresAt.IsZero() {
		t.Fatalf("get %+v", kv)
	}
	kv.Value[0] = 'x'
	if kv := c.getKV(t, "k"); string(kv.Value) != "b" {
		t.Fatalf("a returned value aliases the stored one: %q", kv.Value)
	}
	_, err = c.s.GetKV(c.ctx, "missing")
	wantIs(t, "get missing", err, store.ErrNotFound)
	_, err = c.s.PutKV(c.ctx, "missing", []byte("x"), 3, 0)
	wantIs(t, "update missing", err, store.ErrConflict)
	_, err = c.s.PutKV(c.ctx, "", []byte("x"), 0, 0)
	wantInvalid(t, "put without a key", err)
}

// kvExpiry: a value with a TTL is gone at its expiry, can then be created
// again, and can no longer be updated.
func kvExpiry(t *testing.T, c *contract) {
	c.putKV(t, "k", "a", 0, time.Minute)
	if kv := c.getKV(t, "k"); !kv.ExpiresAt.Equal(c.clock.Now().Add(time.Minute)) {
		t.Fatalf("expires %v, want a minute on", kv.ExpiresAt)
	}
	c.clock.Advance(time.Minute - time.Second)
	c.getKV(t, "k")
	c.clock.Advance(time.Second)
	_, err := c.s.GetKV(c.ctx, "k")
	wantIs(t, "get expired", err, store.ErrNotFound)
	if list, err := c.s.ListKV(c.ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("list after expiry: %v %v", list, err)
	}
	_, err = c.s.PutKV(c.ctx, "k", []byte("b"), 1, 0)
	wantIs(t, "update expired", err, store.ErrConflict)
	if v := c.putKV(t, "k", "b", 0, 0); v != 1 {
		t.Fatalf("create over expired: version %d", v)
	}
}

// kvDeleteAndList: deletes name the version; listing is by prefix and key.
func kvDeleteAndList(t *testing.T, c *contract) {
	c.putKV(t, "chain/b", "2", 0, 0)
	c.putKV(t, "chain/a", "1", 0, 0)
	c.putKV(t, "other/x", "x", 0, 0)
	c.putKV(t, "chain/c", "3", 0, time.Second)
	c.clock.Advance(time.Second)
	list, err := c.s.ListKV(c.ctx, "chain/")
	must(t, err)
	var got []string
	for _, kv := range list {
		got = append(got, kv.Key+"="+string(kv.Value))
	}
	if !slices.Equal(got, []string{"chain/a=1", "chain/b=2"}) {
		t.Fatalf("list chain/: %v", got)
	}
	if kv := c.getKV(t, "other/x"); string(kv.Value) != "x" || kv.Version != 1 {
		t.Fatalf("get other/x %+v", kv)
	}
	wantIs(t, "delete stale", c.s.DeleteKV(c.ctx, "chain/a", 2), store.ErrConflict)
	must(t, c.s.DeleteKV(c.ctx, "chain/a", 1))
	_, err = c.s.GetKV(c.ctx, "chain/a")
	wantIs(t, "get deleted", err, store.ErrNotFound)
	wantIs(t, "delete missing", c.s.DeleteKV(c.ctx, "chain/a", 1), store.ErrConflict)
	must(t, c.s.DeleteKV(c.ctx, "chain/c", 1)) // expired, but at that version
}

// iceMarks: a mark lasts until its time; a shorter mark never shortens it.
func iceMarks(t *testing.T, c *contract) {
	now := c.clock.Now()
	o1 := store.Offering{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}
	o2 := store.Offering{InstanceType: "m5.large", Zone: "us-west-2b", CapacityType: "spot"}
	must(t, c.s.MarkUnavailable(c.ctx, o1, now.Add(3*time.Minute), "ice"))
	must(t, c.s.MarkUnavailable(c.ctx, o1, now.Add(time.Minute), "shorter"))
	must(t, c.s.MarkUnavailable(c.ctx, o2, now.Add(time.Minute), "ice"))
	set, err := c.s.UnavailableOfferings(c.ctx)
	must(t, err)
	if u := set[o1]; len(set) != 2 || !u.Until.Equal(now.Add(3*time.Minute)) || u.Reason != "ice" || u.Offering != o1 {
		t.Fatalf("after a shorter mark: %+v", set)
	}
	must(t, c.s.MarkUnavailable(c.ctx, o1, now.Add(5*time.Minute), "longer"))
	c.clock.Advance(time.Minute)
	set, err = c.s.UnavailableOfferings(c.ctx)
	must(t, err)
	if u, ok := set[o1]; len(set) != 1 || !ok || !u.Until.Equal(now.Add(5*time.Minute)) || u.Reason != "longer" {
		t.Fatalf("a minute on: %+v", set)
	}
	c.clock.Advance(4 * time.Minute)
	if set, err := c.s.UnavailableOfferings(c.ctx); err != nil || len(set) != 0 {
		t.Fatalf("after every mark expired: %+v %v", set, err)
	}
	// One reservation's mark is its own entry, beside a type-wide one.
	later := c.clock.Now()
	r1 := store.Offering{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "reserved", ReservationID: "cr-1"}
	r0 := store.Offering{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "reserved"}
	must(t, c.s.MarkUnavailable(c.ctx, r1, later.Add(time.Minute), "ReservationCapacityExceeded"))
	must(t, c.s.MarkUnavailable(c.ctx, r0, later.Add(2*time.Minute), "InsufficientInstanceCapacity"))
	set, err = c.s.UnavailableOfferings(c.ctx)
	must(t, err)
	if u1, u0 := set[r1], set[r0]; len(set) != 2 || u1.Offering != r1 || !u1.Until.Equal(later.Add(time.Minute)) || u0.Offering != r0 {
		t.Fatalf("a reservation's and a type's marks: %+v", set)
	}
	c.clock.Advance(2 * time.Minute)
	wantInvalid(t, "mark with '#' in the reservation", c.s.MarkUnavailable(c.ctx, store.Offering{InstanceType: "m5.large", Zone: "z", CapacityType: "reserved", ReservationID: "cr#1"}, now, ""))
	wantInvalid(t, "mark without a zone", c.s.MarkUnavailable(c.ctx, store.Offering{InstanceType: "m5.large", CapacityType: "spot"}, now, ""))
	wantInvalid(t, "mark with '#'", c.s.MarkUnavailable(c.ctx, store.Offering{InstanceType: "m5#large", Zone: "z", CapacityType: "spot"}, now, ""))
}

func observation(itype, variant, mem string, at time.Time) store.ObservedCapacity {
	return store.ObservedCapacity{
		InstanceType: itype, Variant: variant, NodeName: "node-" + mem, ObservedAt: at,
		Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("7910Mi")},
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse(mem)},
	}
}

// observedCapacity: the newest observation per type and variant is kept.
func observedCapacity(t *testing.T, c *contract) {
	now := c.clock.Now()
	must(t, c.s.RecordObservedCapacity(c.ctx, observation("m5.large", "al2023", "7134Mi", now)))
	must(t, c.s.RecordObservedCapacity(c.ctx, observation("m5.large", "al2023", "1Mi", now.Add(-time.Hour))))
	must(t, c.s.RecordObservedCapacity(c.ctx, observation("m5.large", "", "7000Mi", now.Add(-time.Hour))))
	must(t, c.s.RecordObservedCapacity(c.ctx, observation("m5.large", "", "7001Mi", now.Add(-time.Hour)))) // same time: replaces
	must(t, c.s.RecordObservedCapacity(c.ctx, observation("c5.large", "", "3000Mi", time.Time{})))
	got, err := c.s.ObservedCapacities(c.ctx)
	must(t, err)
	var keys []string
	for _, o := range got {
		mem := o.Allocatable[corev1.ResourceMemory]
		cpu := o.Capacity[corev1.ResourceCPU]
		keys = append(keys, o.InstanceType+"/"+o.Variant+"="+mem.String()+","+cpu.String()+","+o.NodeName+"@"+o.ObservedAt.UTC().Format(time.RFC3339))
	}
	at, hourAgo := now.Format(time.RFC3339), now.Add(-time.Hour).Format(time.RFC3339)
	want := []string{
		"c5.large/=3000Mi,2,node-3000Mi@" + at,
		"m5.large/=7001Mi,2,node-7001Mi@" + hourAgo,
		"m5.large/al2023=7134Mi,2,node-7134Mi@" + at,
	}
	if !slices.Equal(keys, want) {
		t.Fatalf("observations\n got %v\nwant %v", keys, want)
	}
	wantInvalid(t, "record without a type", c.s.RecordObservedCapacity(c.ctx, observation("", "", "1Mi", now)))
	empty := observation("m5.large", "", "1Mi", now)
	empty.Allocatable = nil
	wantInvalid(t, "record without allocatable", c.s.RecordObservedCapacity(c.ctx, empty))
}

// blobs: values of any size round-trip with when they were fetched.
func blobs(t *testing.T, c *contract) {
	_, _, err := c.s.GetBlob(c.ctx, "prices")
	wantIs(t, "get missing blob", err, store.ErrNotFound)
	var v map[string]int
	_, err = c.s.GetJSON(c.ctx, "catalog", &v)
	wantIs(t, "get missing json", err, store.ErrNotFound)

	fetched := c.clock.Now().Add(-time.Minute + 123*time.Millisecond)
	small := []byte(`{"m5.large":0.096}`)
	must(t, c.s.PutBlob(c.ctx, "prices", small, fetched))
	wantBlob := func(want []byte, parts int) {
		t.Helper()
		got, info, err := c.s.GetBlob(c.ctx, "prices")
		if err != nil || !bytes.Equal(got, want) || !info.FetchedAt.Equal(fetched) || info.Size != len(want) || info.Parts != parts {
			t.Fatalf("blob of %d bytes: %d bytes, %+v, %v; want %d parts", len(want), len(got), info, err, parts)
		}
		got[0] ^= 0xff
	}
	wantBlob(small, 1)
	small[0] = 'x'
	wantBlob([]byte(`{"m5.large":0.096}`), 1)

	big := make([]byte, 700<<10) // incompressible: three 300 KiB parts
	rng := rand.NewChaCha8([32]byte{1})
	_, _ = rng.Read(big)
	must(t, c.s.PutBlob(c.ctx, "prices", big, fetched))
	wantBlob(big, 3)

	must(t, c.s.PutJSON(c.ctx, "catalog", map[string]int{"a": 1}, fetched))
	at, err := c.s.GetJSON(c.ctx, "catalog", &v)
	if err != nil || v["a"] != 1 || !at.Equal(fetched) {
		t.Fatalf("json: %v at %v, %v", v, at, err)
	}
	wantInvalid(t, "put without a name", c.s.PutBlob(c.ctx, "", small, fetched))
}
