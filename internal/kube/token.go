// Package kube is nodewright's access to the EKS API server: authentication
// with IAM (STS presigned tokens), a memory-lean cluster snapshot per pass,
// and the node/pod operations the controllers perform.
package kube

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// EKS IAM token format, as aws-iam-authenticator defines it.
const (
	TokenPrefix     = "k8s-aws-v1."
	ClusterIDHeader = "x-k8s-aws-id"
	// TokenValidity is how long EKS accepts a token after it was signed.
	TokenValidity = 15 * time.Minute
	// tokenRefresh is when a cached token is replaced: a minute of margin
	// for clock skew and requests in flight.
	tokenRefresh = 14 * time.Minute
	// presignExpires is the X-Amz-Expires of the presigned URL, the value
	// aws-iam-authenticator uses (the server enforces its own 15 minutes).
	presignExpires = "60"
)

// TokenSource mints EKS bearer tokens for one cluster: a presigned STS
// GetCallerIdentity URL whose signature covers the x-k8s-aws-id header. Tokens
// are cached and replaced after 14 minutes or after Invalidate. Safe for
// concurrent use.
type TokenSource struct {
	presign *sts.PresignClient
	cluster string
	now     func() time.Time
	// afterMint, if set, is called after each mint (tests count mints).
	afterMint func()

	mu      sync.Mutex
	token   string
	expires time.Time // when to refresh (not the server's limit)
}

// NewTokenSource builds a token source from an AWS configuration (region and
// credentials; the STS endpoint honours AWS_ENDPOINT_URL_STS and
// AWS_ENDPOINT_URL when cfg comes from config.LoadDefaultConfig).
func NewTokenSource(cfg aws.Config, clusterName string, optFns ...func(*sts.Options)) (*TokenSource, error) {
	if clusterName == "" {
		return nil, errors.New("eks token source: empty cluster name")
	}
	if cfg.Region == "" {
		return nil, errors.New("eks token source: AWS region not set")
	}
	client := sts.NewFromConfig(cfg, optFns...)
	return &TokenSource{presign: sts.NewPresignClient(client), cluster: clusterName, now: time.Now}, nil
}

// Token returns a valid token, minting a new one when the cached one is due.
func (ts *TokenSource) Token(ctx context.Context) (string, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	now := ts.now()
	if ts.token != "" && now.Before(ts.expires) {
		return ts.token, nil
	}
	tok, err := ts.mint(ctx)
	if err != nil {
		return "", err
	}
	ts.token, ts.expires = tok, now.Add(tokenRefresh)
	if ts.afterMint != nil {
		ts.afterMint()
	}
	return tok, nil
}

// Invalidate drops the cached token (after a 401) so the next call mints one.
func (ts *TokenSource) Invalidate() {
	ts.mu.Lock()
	ts.token = ""
	ts.mu.Unlock()
}

func (ts *TokenSource) mint(ctx context.Context) (string, error) {
	req, err := ts.presign.PresignGetCallerIdentity(ctx, &sts.GetCallerIdentityInput{}, func(o *sts.PresignOptions) {
		o.ClientOptions = append(o.ClientOptions, func(so *sts.Options) {
			so.APIOptions = append(so.APIOptions, addClusterIDAndExpiry(ts.cluster))
		})
	})
	if err != nil {
		return "", fmt.Errorf("presign sts GetCallerIdentity for cluster %s: %w", ts.cluster, err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(req.URL)), nil
}

// addClusterIDAndExpiry runs in the build step, after the query protocol
// request was turned into a GET and before the presigner signs it, so both
// the header and X-Amz-Expires are covered by the signature.
func addClusterIDAndExpiry(cluster string) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Build.Add(middleware.BuildMiddlewareFunc("nodewright.EKSClusterID",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					req.Header.Set(ClusterIDHeader, cluster)
					q := req.URL.Query()
					q.Set("X-Amz-Expires", presignExpires)
					req.URL.RawQuery = q.Encode()
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	}
}

// DecodeToken returns the presigned URL inside an EKS token (for tests and
// diagnostics).
func DecodeToken(token string) (string, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return "", fmt.Errorf("token does not start with %q", TokenPrefix)
	}
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(token, TokenPrefix))
	if err != nil {
		return "", fmt.Errorf("token payload is not base64url: %w", err)
	}
	return string(b), nil
}

// bearerTransport adds the EKS token to every request and drops the cached
// token when the API server answers 401, so the next request re-mints it
// (credentials rotated, clock jumped).
type bearerTransport struct {
	ts   *TokenSource
	base http.RoundTripper
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.ts.Token(req.Context())
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		t.ts.Invalidate()
	}
	return resp, err
}
