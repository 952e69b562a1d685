package localrun

import (
	"net/http"
	"sync/atomic"
)

// throttled is a function URL in front of h: beyond the function's reserved
// concurrency (0: unreserved) Lambda answers 429 TooManyRequestsException
// without running it ("Lambda function scaling"; "Invoking Lambda function
// URLs", throttling). The webhook's failurePolicy Ignore makes the API
// server carry on.
func throttled(h http.Handler, reserved int, f *faults) http.Handler {
	if reserved <= 0 {
		return h
	}
	var running atomic.Int64
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if running.Add(1) > int64(reserved) {
			running.Add(-1)
			f.throttles.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("x-amzn-ErrorType", "TooManyRequestsException")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"Message":"Rate Exceeded."}`))
			return
		}
		defer running.Add(-1)
		h.ServeHTTP(w, r)
	})
}
