package kube

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

func testAWSConfig(endpoint string) aws.Config {
	return aws.Config{
		Region:       "us-west-2",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

// The token is a presigned GetCallerIdentity URL whose SigV4 signature covers
// the cluster header and X-Amz-Expires; re-signing the same request with the
// SDK's signer must reproduce the signature exactly.
func TestTokenIsPresignedCallerIdentity(t *testing.T) {
	ts, err := NewTokenSource(testAWSConfig("https://sts.local.test"), "prod-cluster")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := ts.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || strings.ContainsAny(strings.TrimPrefix(tok, TokenPrefix), "=+/") {
		t.Fatalf("token %q is not k8s-aws-v1. + unpadded base64url", tok)
	}
	raw, err := DecodeToken(tok)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	if u.Host != "sts.local.test" || u.Scheme != "https" {
		t.Fatalf("presigned for %s://%s", u.Scheme, u.Host)
	}
	want := map[string]string{
		"Action": "GetCallerIdentity", "Version": "2011-06-15", "X-Amz-Expires": "60",
		"X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-SignedHeaders": "host;x-k8s-aws-id",
	}
	for k, v := range want {
		if q.Get(k) != v {
			t.Errorf("%s=%q, want %q (url %s)", k, q.Get(k), v, raw)
		}
	}
	if !strings.HasSuffix(q.Get("X-Amz-Credential"), "/us-west-2/sts/aws4_request") {
		t.Errorf("credential scope %q", q.Get("X-Amz-Credential"))
	}

	signTime, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		t.Fatal(err)
	}
	gotSig := q.Get("X-Amz-Signature")
	q.Del("X-Amz-Signature")
	u.RawQuery = q.Encode()
	req, _ := http.NewRequest(http.MethodGet, u.String(), nil)
	req.Header.Set(ClusterIDHeader, "prod-cluster")
	empty := sha256.Sum256(nil)
	creds, _ := credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", "").Retrieve(context.Background())
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, req, hex.EncodeToString(empty[:]), "sts", "us-west-2", signTime)
	if err != nil {
		t.Fatal(err)
	}
	su, _ := url.Parse(signed)
	if su.Query().Get("X-Amz-Signature") != gotSig {
		t.Fatalf("signature does not verify: token %s, recomputed %s", gotSig, su.Query().Get("X-Amz-Signature"))
	}
	// Another cluster name must give a different signature (header is signed).
	other, _ := NewTokenSource(testAWSConfig("https://sts.local.test"), "other-cluster")
	otok, _ := other.Token(context.Background())
	oraw, _ := DecodeToken(otok)
	ou, _ := url.Parse(oraw)
	if ou.Query().Get("X-Amz-Date") == q.Get("X-Amz-Date") && ou.Query().Get("X-Amz-Signature") == gotSig {
		t.Fatal("signature independent of the cluster header")
	}
}

func TestTokenCachedAndRefreshedEarly(t *testing.T) {
	ts, err := NewTokenSource(testAWSConfig("https://sts.local.test"), "c")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts.now = func() time.Time { return now }
	var mints atomic.Int64
	ts.afterMint = func() { mints.Add(1) }
	ctx := context.Background()
	a, _ := ts.Token(ctx)
	now = now.Add(13 * time.Minute)
	b, _ := ts.Token(ctx)
	if a != b || mints.Load() != 1 {
		t.Fatalf("token re-minted within 13 minutes (mints=%d)", mints.Load())
	}
	now = now.Add(time.Minute + time.Second) // 14m01s: inside EKS's 15 min, but due
	if _, err := ts.Token(ctx); err != nil {
		t.Fatal(err)
	}
	if mints.Load() != 2 {
		t.Fatalf("token not refreshed after 14 minutes (mints=%d)", mints.Load())
	}
	ts.Invalidate()
	if _, err := ts.Token(ctx); err != nil || mints.Load() != 3 {
		t.Fatalf("token not re-minted after Invalidate (mints=%d, err=%v)", mints.Load(), err)
	}
	if _, err := NewTokenSource(testAWSConfig(""), ""); err == nil {
		t.Fatal("empty cluster name accepted")
	}
}

// A 401 drops the cached token, so the next request carries a new one.
func TestBearerTransportReMintsAfter401(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
		if len(seen) == 1 {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	ts, _ := NewTokenSource(testAWSConfig("https://sts.local.test"), "c")
	var mints atomic.Int64
	ts.afterMint = func() { mints.Add(1) }
	rt := &bearerTransport{ts: ts, base: http.DefaultTransport}
	for range 3 {
		req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
		resp, err := rt.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if mints.Load() != 2 {
		t.Fatalf("mints=%d, want 2 (initial + after the 401)", mints.Load())
	}
	for _, h := range seen {
		if !strings.HasPrefix(h, "Bearer "+TokenPrefix) {
			t.Fatalf("Authorization %q", h)
		}
	}
}
