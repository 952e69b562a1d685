package cloudtest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/nodewright/nodewright/internal/store"
)

// ErrCrashed is what every call of a crashed process returns.
var ErrCrashed = errors.New("process crashed")

// Crasher simulates a function killed right after its At-th external call
// returns (At 0: never): that call's effect happened, its answer is lost,
// and nothing the process attempts afterwards reaches any server. It
// counts at the HTTP layer, so one Crasher covers every client a function
// has (DynamoDB, EC2, SQS, EKS, the API server) without knowing their
// interfaces: wrap the AWS config's HTTP client with HTTPClient and the
// Kubernetes client configuration with REST.
type Crasher struct {
	At int

	mu      sync.Mutex
	n       int
	crashed bool
	calls   []string
}

// HTTPClient is an *http.Client for aws.Config.HTTPClient
// (config.WithHTTPClient) whose calls count.
func (c *Crasher) HTTPClient() *http.Client {
	return &http.Client{Transport: c.wrap(http.DefaultTransport.(*http.Transport).Clone())}
}

// REST returns a copy of cfg whose calls count.
func (c *Crasher) REST(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return c.wrap(rt) }
	return out
}

// Crashed reports whether the process died.
func (c *Crasher) Crashed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.crashed
}

// Calls are the calls made, in order ("POST dynamodb.UpdateItem", ...).
func (c *Crasher) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

func (c *Crasher) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if c.crashed {
			c.mu.Unlock()
			return crashedResponse(req), nil
		}
		c.n++
		k := c.n
		c.calls = append(c.calls, callName(req))
		c.mu.Unlock()
		resp, err := next.RoundTrip(req)
		c.mu.Lock()
		defer c.mu.Unlock()
		if k == c.At {
			c.crashed = true
		}
		if c.crashed {
			if resp != nil {
				resp.Body.Close()
			}
			return crashedResponse(req), nil
		}
		return resp, err
	})
}

// crashedResponse is what a dead process "receives": a client error no
// SDK retries (a transport error would be retried for seconds), so the
// crashed run ends at once, as a killed one would.
func crashedResponse(req *http.Request) *http.Response {
	body := `{"__type":"ProcessCrashed","message":"` + ErrCrashed.Error() + `"}`
	return &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/x-amz-json-1.0"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}
}

// callName names a request for logs: the JSON protocols' target, the EC2
// query's path, or the Kubernetes verb and path.
func callName(req *http.Request) string {
	if t := req.Header.Get("X-Amz-Target"); t != "" {
		return req.Method + " " + t
	}
	if strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			b, _ := io.ReadAll(io.LimitReader(body, 4096))
			body.Close()
			if form, err := url.ParseQuery(string(b)); err == nil && form.Get("Action") != "" {
				return req.Method + " " + form.Get("Action")
			}
		}
	}
	return req.Method + " " + req.URL.Path
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// ExpireLeases releases the named leases if someone holds them: what their
// expiry would do once a crashed holder stops renewing, without the wait.
func ExpireLeases(ctx context.Context, t testing.TB, st *store.Store, names ...string) {
	t.Helper()
	for _, name := range names {
		l, err := st.GetLease(ctx, name)
		if err != nil || !l.Valid(time.Now()) {
			continue
		}
		if err := st.ReleaseLease(ctx, l); err != nil {
			t.Fatalf("expire lease %s: %v", name, err)
		}
	}
}

// CrashSweep runs scenario once with a Crasher that never fires, to count
// its external calls, then once per call k, in a subtest, with the process
// killed right after call k. A scenario that makes fewer than min calls
// fails the test: a sweep over nothing proves nothing.
func CrashSweep(t *testing.T, min int, scenario func(t *testing.T, cr *Crasher)) {
	t.Helper()
	clean := &Crasher{}
	scenario(t, clean)
	if t.Failed() {
		t.Fatal("the run without a crash failed: nothing to sweep")
	}
	calls := clean.Calls()
	t.Logf("a clean run makes %d external calls: %s", len(calls), strings.Join(calls, ", "))
	if len(calls) < min {
		t.Fatalf("implausibly few calls (%d < %d)", len(calls), min)
	}
	for k := 1; k <= len(calls); k++ {
		t.Run(fmt.Sprintf("crash-after-%d", k), func(t *testing.T) {
			scenario(t, &Crasher{At: k})
		})
	}
}
