package scaletest

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// wireCounter is a reverse proxy in front of DynamoDB or the AWS simulator
// that counts the calls the functions make, by service, at the wire: what
// AWS would bill and throttle.
type wireCounter struct {
	dynamodb, sqs, other atomic.Int64
}

// wireCounts are a wireCounter's totals at one moment.
type wireCounts struct{ DynamoDB, SQS, Other int64 }

func (c *wireCounter) counts() wireCounts {
	return wireCounts{DynamoDB: c.dynamodb.Load(), SQS: c.sqs.Load(), Other: c.other.Load()}
}

func (a wireCounts) minus(b wireCounts) wireCounts {
	return wireCounts{DynamoDB: a.DynamoDB - b.DynamoDB, SQS: a.SQS - b.SQS, Other: a.Other - b.Other}
}

func (a wireCounts) plus(b wireCounts) wireCounts {
	return wireCounts{DynamoDB: a.DynamoDB + b.DynamoDB, SQS: a.SQS + b.SQS, Other: a.Other + b.Other}
}

// front starts the proxy to target and returns its URL; it stops with t.
func (c *wireCounter) front(t testing.TB, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
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
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
