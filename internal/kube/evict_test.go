package kube

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
)

// evictServer answers evictions with the given status codes in turn (the
// last one repeats) and counts the requests.
func evictServer(t *testing.T, codes ...int) (*Client, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v1/namespaces/ns/pods/p/eviction" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		i := int(n.Add(1)) - 1
		code := codes[min(i, len(codes)-1)]
		w.Header().Set("Content-Type", "application/json")
		if code == http.StatusTooManyRequests {
			w.Header().Set("Retry-After", "10") // client-go would sleep 10 s per retry
		}
		w.WriteHeader(code)
		if code >= 300 {
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","code":%d,"message":"answer %d"}`, code, code)
			return
		}
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success","code":201}`))
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c, &n
}

var testPod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1"}}

func TestEvictPDBBlockedIsImmediate(t *testing.T) {
	c, n := evictServer(t, http.StatusTooManyRequests)
	start := time.Now()
	err := c.Evict(context.Background(), testPod, EvictOptions{})
	if !errors.Is(err, ErrPDBBlocked) {
		t.Fatalf("want ErrPDBBlocked, got %v", err)
	}
	if n.Load() != 1 || time.Since(start) > time.Second {
		t.Fatalf("%d requests in %v: a 429 must not be retried", n.Load(), time.Since(start))
	}
}

func TestEvictRetriesServerErrors(t *testing.T) {
	c, n := evictServer(t, 500, 503, 201)
	if err := c.Evict(context.Background(), testPod, EvictOptions{}); err != nil {
		t.Fatal(err)
	}
	if n.Load() != 3 {
		t.Fatalf("%d requests, want 3", n.Load())
	}
	c, n = evictServer(t, 500)
	err := c.Evict(context.Background(), testPod, EvictOptions{Attempts: 3})
	if err == nil || n.Load() != 3 {
		t.Fatalf("persistent 500: err=%v after %d requests, want an error after 3", err, n.Load())
	}
	c, _ = evictServer(t, 404)
	if err := c.Evict(context.Background(), testPod, EvictOptions{}); err != nil {
		t.Fatalf("evicting a missing pod: %v", err)
	}
	c, n = evictServer(t, 403)
	if err := c.Evict(context.Background(), testPod, EvictOptions{}); err == nil || n.Load() != 1 {
		t.Fatalf("403: err=%v after %d requests, want one failed request", err, n.Load())
	}
}

// Other packages unit-test against client-go's fake clientset, which has no
// REST client: Evict must still work there.
func TestEvictWithFakeClientset(t *testing.T) {
	pod := testPod.DeepCopy()
	cs := fake.NewClientset(pod)
	c := NewClientFromClientset(cs, nil)
	if err := c.Evict(context.Background(), pod, EvictOptions{}); err != nil {
		t.Fatal(err)
	}
	evicted := false
	for _, a := range cs.Actions() {
		evicted = evicted || (a.GetVerb() == "create" && a.GetSubresource() == "eviction")
	}
	if !evicted {
		t.Fatalf("no eviction recorded: %v", cs.Actions())
	}
}
