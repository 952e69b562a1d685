package scaletest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// wireCounter is a reverse proxy in front of DynamoDB or the AWS simulator
// that counts the calls the functions make, by service, at the wire: what
// AWS would bill and throttle.
type wireCounter struct {
	dynamodb, sqs, other atomic.Int64
	// busy is the time calls spent in flight, summed: with the count, the
	// mean round trip of the local DynamoDB and simulator.
	busy atomic.Int64
}

// wireCounts are a wireCounter's totals at one moment.
type wireCounts struct {
	DynamoDB, SQS, Other int64
	Busy                 time.Duration
}

func (c *wireCounter) counts() wireCounts {
	return wireCounts{DynamoDB: c.dynamodb.Load(), SQS: c.sqs.Load(), Other: c.other.Load(), Busy: time.Duration(c.busy.Load())}
}

func (a wireCounts) minus(b wireCounts) wireCounts {
	return wireCounts{DynamoDB: a.DynamoDB - b.DynamoDB, SQS: a.SQS - b.SQS, Other: a.Other - b.Other, Busy: a.Busy - b.Busy}
}

func (a wireCounts) plus(b wireCounts) wireCounts {
	return wireCounts{DynamoDB: a.DynamoDB + b.DynamoDB, SQS: a.SQS + b.SQS, Other: a.Other + b.Other, Busy: a.Busy + b.Busy}
}

// keepAlive is the proxies' transport: a provisioner's launches make 32
// calls at once, and net/http's default keeps 2 idle connections, so the
// proxy dialed the simulator anew for most calls, a cost the functions do
// not have on AWS.
func keepAlive() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	return t
}

// front starts the proxy to target and returns its URL; it stops with t.
func (c *wireCounter) front(t testing.TB, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = keepAlive()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The JSON protocols name the operation in X-Amz-Target
		// ("DynamoDB_20120810.Query", "AmazonSQS.SendMessage"); EC2's
		// query protocol has none.
		switch svc, _, _ := strings.Cut(r.Header.Get("X-Amz-Target"), "."); {
		case strings.HasPrefix(svc, "DynamoDB"):
			c.dynamodb.Add(1)
		case svc == "AmazonSQS":
			c.sqs.Add(1)
		default:
			c.other.Add(1)
		}
		start := time.Now()
		rp.ServeHTTP(w, r)
		c.busy.Add(int64(time.Since(start)))
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(rp.Transport.(*http.Transport).CloseIdleConnections)
	return srv.URL
}
