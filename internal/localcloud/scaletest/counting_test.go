package scaletest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// TestWireCounterKeepsConnections: the counting proxy reuses its
// connections to the service behind it from one round of concurrent calls
// to the next (net/http's default keeps 2 idle and dials anew for the
// rest), and counts every call.
func TestWireCounterKeepsConnections(t *testing.T) {
	const concurrent, rounds = 12, 4
	conns := make(chan struct{}, concurrent*rounds)
	behind := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		time.Sleep(50 * time.Millisecond) // the round's calls overlap
	}))
	behind.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns <- struct{}{}
		}
	}
	behind.Start()
	t.Cleanup(behind.Close)
	var c wireCounter
	url := c.front(t, behind.URL)
	caller := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for range rounds {
		var g errgroup.Group
		for range concurrent {
			g.Go(func() error {
				req, err := http.NewRequest(http.MethodPost, url, http.NoBody)
				if err != nil {
					return err
				}
				req.Header.Set("X-Amz-Target", "AmazonSQS.SendMessage")
				resp, err := caller.Do(req)
				if err == nil {
					err = resp.Body.Close()
				}
				return err
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
	}
	caller.CloseIdleConnections()
	if n := len(conns); n > concurrent {
		t.Errorf("the proxy opened %d connections for %d rounds of %d concurrent calls, want at most %d", n, rounds, concurrent, concurrent)
	}
	if n := c.counts().SQS; n != concurrent*rounds {
		t.Errorf("counted %d SQS calls, want %d", n, concurrent*rounds)
	}
}

// TestProcCPU: a process's CPU time is read from /proc under its command
// name and grows as it works; a process that is gone counts nothing.
func TestProcCPU(t *testing.T) {
	before := procCPU(os.Getpid())
	for deadline := time.Now().Add(200 * time.Millisecond); time.Now().Before(deadline); { //nolint:revive // burning CPU on purpose
	}
	sum, by := cpuSince(before, procCPU(os.Getpid()))
	if sum < 100*time.Millisecond {
		t.Errorf("200 ms of work read as %s of CPU", sum)
	}
	if len(by) != 1 || by[filepath.Base(os.Args[0])[:min(15, len(filepath.Base(os.Args[0])))]] != sum {
		t.Errorf("by command: %v, want this test binary's name alone with %s", by, sum)
	}
	if got := procCPU(-1); len(got) != 0 {
		t.Errorf("a missing process: %v", got)
	}
}
