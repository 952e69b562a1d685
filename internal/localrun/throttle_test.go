package localrun

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
)

// The function URL answers 429 beyond the webhook's reserved concurrency
// without running it, and counts the throttle.
func TestFunctionURLThrottles(t *testing.T) {
	f := newFaults(NoFaults(), testTick)
	inside := make(chan struct{})
	release := make(chan struct{})
	h := throttled(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		inside <- struct{}{}
		<-release
	}), 1, f)
	first := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(first, httptest.NewRequest(http.MethodPost, "/admit/s", nil))
		close(done)
	}()
	<-inside
	second := httptest.NewRecorder()
	h.ServeHTTP(second, httptest.NewRequest(http.MethodPost, "/admit/s", nil))
	close(release)
	<-done
	if second.Code != http.StatusTooManyRequests || second.Header().Get("x-amzn-ErrorType") != "TooManyRequestsException" || first.Code != http.StatusOK {
		t.Fatalf("first %d, second %d %v", first.Code, second.Code, second.Header())
	}
	if f.stats().Throttles != 1 {
		t.Errorf("stats %v", f.stats())
	}
	if got := throttled(h, 0, f); reflect.ValueOf(got).Pointer() != reflect.ValueOf(h).Pointer() {
		t.Error("an unreserved function URL is throttled")
	}
}
