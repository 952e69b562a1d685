package awssim

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestDynamoDBUpstreamKeepsConnections: concurrent DynamoDB calls reuse
// their connections to dynalite from one wave of calls to the next instead
// of dialing a new one per call (net/http's default keeps 2 idle).
func TestDynamoDBUpstreamKeepsConnections(t *testing.T) {
	const calls, waves = 16, 3
	var dials atomic.Int64
	var arrived sync.WaitGroup
	var release atomic.Pointer[chan struct{}]
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived.Done()
		select { // hold every call of the wave until all are in flight
		case <-*release.Load():
		case <-time.After(5 * time.Second):
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	up.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			dials.Add(1)
		}
	}
	up.Start()
	t.Cleanup(up.Close)
	s, _ := newTestServer(t, nil)
	s.SetDynamoDBUpstream(up.URL)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)
	for range waves {
		arrived.Add(calls)
		wave := make(chan struct{})
		release.Store(&wave)
		var done sync.WaitGroup
		for range calls {
			done.Go(func() {
				req, _ := http.NewRequest(http.MethodPost, s.URL(), strings.NewReader(`{"TableName":"t"}`))
				req.Header.Set("X-Amz-Target", dynamoTargetPrefix+".GetItem")
				resp, err := client.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d", resp.StatusCode)
				}
			})
		}
		arrived.Wait()
		close(wave)
		done.Wait()
	}
	if n := dials.Load(); n > calls {
		t.Fatalf("%d connections to the upstream for %d waves of %d concurrent calls, want at most %d", n, waves, calls, calls)
	}
}
