package store_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/store"
)

func TestICESet(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	now := e.clock.Now()
	spot := store.Offering{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}
	od := store.Offering{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "on-demand"}
	if err := s.MarkUnavailable(e.ctx, spot, now.Add(3*time.Minute), "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	// A shorter, later mark must not shorten the entry.
	if err := s.MarkUnavailable(e.ctx, spot, now.Add(time.Minute), "again"); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkUnavailable(e.ctx, od, now.Add(time.Minute), "InsufficientInstanceCapacity"); err != nil {
		t.Fatal(err)
	}
	got, err := s.UnavailableOfferings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got[spot].Until.Equal(now.Add(3*time.Minute)) || got[spot].Reason != "InsufficientInstanceCapacity" {
		t.Fatalf("ice set %+v", got)
	}
	e.clock.Advance(2 * time.Minute)
	got, err = s.UnavailableOfferings(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got[od]; ok || len(got) != 1 {
		t.Fatalf("expired entry still listed: %+v", got)
	}
	if err := s.MarkUnavailable(e.ctx, store.Offering{InstanceType: "m5.large"}, now, ""); err == nil {
		t.Fatal("offering without zone accepted")
	}
}

func TestBlobsChunkAndReplace(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	if _, _, err := s.GetBlob(e.ctx, "prices/us-east-1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing blob: want ErrNotFound, got %v", err)
	}
	// Incompressible 1.5 MB: gzip cannot shrink it under one 400 KB item.
	big := make([]byte, 1500<<10)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	t1 := e.clock.Now()
	if err := s.PutBlob(e.ctx, "catalog", big, t1); err != nil {
		t.Fatal(err)
	}
	got, info, err := s.GetBlob(e.ctx, "catalog")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, big) || info.Parts < 4 || !info.FetchedAt.Equal(t1) {
		t.Fatalf("blob roundtrip: equal=%v parts=%d fetchedAt=%v", bytes.Equal(got, big), info.Parts, info.FetchedAt)
	}
	// Replace with a small value; the old generation's parts are removed.
	type prices struct{ OnDemand map[string]float64 }
	t2 := t1.Add(12 * time.Hour)
	if err := s.PutJSON(e.ctx, "catalog", prices{OnDemand: map[string]float64{"m5.large": 0.096}}, t2); err != nil {
		t.Fatal(err)
	}
	var p prices
	fetched, err := s.GetJSON(e.ctx, "catalog", &p)
	if err != nil {
		t.Fatal(err)
	}
	if p.OnDemand["m5.large"] != 0.096 || !fetched.Equal(t2) {
		t.Fatalf("json blob %+v fetched %v", p, fetched)
	}
	out, err := e.db.Scan(e.ctx, &dynamodb.ScanInput{TableName: aws.String(e.table)})
	if err != nil {
		t.Fatal(err)
	}
	if out.Count != 2 { // head + one part
		t.Fatalf("after replace the table holds %d items, want 2 (old parts not cleaned up)", out.Count)
	}
}

func TestKV(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	v1, err := s.PutKV(e.ctx, "disruption/checkpoint", []byte("a"), 0, 0)
	if err != nil || v1 != 1 {
		t.Fatalf("create: %d %v", v1, err)
	}
	if _, err := s.PutKV(e.ctx, "disruption/checkpoint", []byte("b"), 0, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: want ErrConflict, got %v", err)
	}
	v2, err := s.PutKV(e.ctx, "disruption/checkpoint", []byte("b"), v1, time.Minute)
	if err != nil || v2 != 2 {
		t.Fatalf("update: %d %v", v2, err)
	}
	if _, err := s.PutKV(e.ctx, "disruption/checkpoint", []byte("c"), v1, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: want ErrConflict, got %v", err)
	}
	kv, err := s.GetKV(e.ctx, "disruption/checkpoint")
	if err != nil || string(kv.Value) != "b" || kv.Version != 2 {
		t.Fatalf("get: %+v %v", kv, err)
	}
	e.clock.Advance(2 * time.Minute)
	if _, err := s.GetKV(e.ctx, "disruption/checkpoint"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("expired: want ErrNotFound, got %v", err)
	}
	if v, err := s.PutKV(e.ctx, "disruption/checkpoint", []byte("d"), 0, 0); err != nil || v != 1 {
		t.Fatalf("create over expired: %d %v", v, err)
	}
	if err := s.DeleteKV(e.ctx, "disruption/checkpoint", 7); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("delete stale: %v", err)
	}
	if err := s.DeleteKV(e.ctx, "disruption/checkpoint", 1); err != nil {
		t.Fatal(err)
	}
}

func TestObservedCapacity(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	now := e.clock.Now()
	obs := func(mem string, at time.Time) store.ObservedCapacity {
		return store.ObservedCapacity{
			InstanceType: "m5.large", Variant: "al2023",
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("7910Mi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1930m"), corev1.ResourceMemory: resource.MustParse(mem)},
			NodeName:    "ip-10-0-0-1", ObservedAt: at,
		}
	}
	if err := s.RecordObservedCapacity(e.ctx, obs("7134Mi", now)); err != nil {
		t.Fatal(err)
	}
	// An older observation arriving late must not replace a newer one.
	if err := s.RecordObservedCapacity(e.ctx, obs("1Mi", now.Add(-time.Hour))); err != nil {
		t.Fatal(err)
	}
	got, err := s.ObservedCapacities(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("%d observations", len(got))
	}
	mem := got[0].Allocatable[corev1.ResourceMemory]
	if mem.String() != "7134Mi" || got[0].Variant != "al2023" {
		t.Fatalf("observation %+v", got[0])
	}
	if err := s.RecordObservedCapacity(e.ctx, store.ObservedCapacity{InstanceType: "m5.large"}); err == nil {
		t.Fatal("empty allocatable accepted")
	}
}

// Unit test of the retry policy over the wire protocol: throttling answers
// are retried with backoff until DynamoDB accepts the request.
func TestRetryerRetriesThrottling(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		if calls.Add(1) <= 4 {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"__type":"com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException","message":"slow down"}`))
			return
		}
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	db := store.NewDynamoDBClient(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("a", "b", ""),
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	s, err := store.New(db, "t")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = s.GetLease(ctx, "x")
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("want ErrNotFound after retries, got %v", err)
	}
	if calls.Load() != 5 {
		t.Fatalf("%d calls, want 5 (4 throttled + 1)", calls.Load())
	}
}

// Racing writers of one blob: every writer either stores or gets ErrConflict,
// at least one stores, and the blob read afterwards is exactly one writer's
// value (never a mix of parts from two generations).
func TestBlobConcurrentWriters(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	const writers = 4
	values := make([][]byte, writers)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range values {
		values[i] = make([]byte, 700<<10) // 2-3 parts each
		for j := range values[i] {
			values[i][j] = byte(r.Uint32())
		}
	}
	errs := make(chan error, writers)
	for i := range writers {
		go func() { errs <- s.PutBlob(e.ctx, "prices", values[i], e.clock.Now()) }()
	}
	stored := 0
	for range writers {
		err := <-errs
		switch {
		case err == nil:
			stored++
		case errors.Is(err, store.ErrConflict):
		default:
			t.Fatal(err)
		}
	}
	if stored == 0 {
		t.Fatal("no writer stored the blob")
	}
	got, _, err := s.GetBlob(e.ctx, "prices")
	if err != nil {
		t.Fatal(err)
	}
	match := 0
	for _, v := range values {
		if bytes.Equal(got, v) {
			match++
		}
	}
	if match != 1 {
		t.Fatalf("stored blob matches %d writers' values", match)
	}
}

func TestListKVByPrefix(t *testing.T) {
	e := newEnv(t)
	s := e.store(t)
	for k, ttl := range map[string]time.Duration{"chain/a": 0, "chain/b": time.Minute, "chain/c": time.Hour, "other/a": 0} {
		if _, err := s.PutKV(e.ctx, k, []byte(k), 0, ttl); err != nil {
			t.Fatal(err)
		}
	}
	e.clock.Advance(2 * time.Minute)
	got, err := s.ListKV(e.ctx, "chain/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range got {
		if string(kv.Value) != kv.Key || kv.Version != 1 {
			t.Errorf("kv %+v", kv)
		}
		keys = append(keys, kv.Key)
	}
	if strings.Join(keys, ",") != "chain/a,chain/c" {
		t.Errorf("listed %v, want chain/a and chain/c (chain/b expired, other/a another prefix)", keys)
	}
}
