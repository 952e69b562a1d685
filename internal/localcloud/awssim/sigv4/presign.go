// Package sigv4 verifies SigV4 presigned STS GetCallerIdentity URLs, the
// payload of EKS bearer tokens, by re-signing them with known credentials.
package sigv4

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// MaxTokenAge is how long STS honours a presigned GetCallerIdentity URL,
// whatever X-Amz-Expires says (which must itself be at most 15 minutes).
const MaxTokenAge = 15 * time.Minute

var emptyPayloadHash = func() string { h := sha256.Sum256(nil); return hex.EncodeToString(h[:]) }()

// Presigned is a verified presigned request.
type Presigned struct {
	AccessKeyID string
	Region      string
	SignedAt    time.Time
}

// VerifyPresignedSTS checks that raw is a GetCallerIdentity URL presigned by
// accessKey with secret lookup, signing header x-k8s-aws-id = clusterID, and
// not expired at now.
func VerifyPresignedSTS(raw, clusterID string, now time.Time, secret func(accessKeyID string) (string, bool)) (*Presigned, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("token url: %w", err)
	}
	q := u.Query()
	if q.Get("Action") != "GetCallerIdentity" || q.Get("Version") != "2011-06-15" {
		return nil, errors.New("token url is not an STS GetCallerIdentity call")
	}
	if u.Path != "/" && u.Path != "" {
		return nil, fmt.Errorf("token url path %q is not /", u.Path)
	}
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return nil, errors.New("token url is not signed with AWS4-HMAC-SHA256")
	}
	signed := strings.Split(q.Get("X-Amz-SignedHeaders"), ";")
	if !contains(signed, "x-k8s-aws-id") || !contains(signed, "host") {
		return nil, errors.New("token url does not sign the host and x-k8s-aws-id headers")
	}
	if len(signed) != 2 {
		return nil, fmt.Errorf("token url signs unexpected headers %v", signed)
	}
	cred := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(cred) != 5 || cred[3] != "sts" || cred[4] != "aws4_request" {
		return nil, fmt.Errorf("token url credential scope %q is not an STS scope", q.Get("X-Amz-Credential"))
	}
	signedAt, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		return nil, fmt.Errorf("token url X-Amz-Date: %w", err)
	}
	expires, err := strconv.Atoi(q.Get("X-Amz-Expires"))
	if err != nil || expires <= 0 || expires > int(MaxTokenAge/time.Second) {
		return nil, fmt.Errorf("token url X-Amz-Expires %q must be 1..900 seconds", q.Get("X-Amz-Expires"))
	}
	if now.Before(signedAt.Add(-5*time.Minute)) || now.After(signedAt.Add(MaxTokenAge)) {
		return nil, fmt.Errorf("token expired or not yet valid (signed %s)", signedAt.Format(time.RFC3339))
	}
	key, ok := secret(cred[0])
	if !ok {
		return nil, fmt.Errorf("unknown access key %s", cred[0])
	}
	got := q.Get("X-Amz-Signature")
	q.Del("X-Amz-Signature")
	check := *u
	check.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, check.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("rebuild token request: %w", err)
	}
	req.Header.Set("x-k8s-aws-id", clusterID)
	want, _, err := v4.NewSigner().PresignHTTP(context.Background(), aws.Credentials{AccessKeyID: cred[0], SecretAccessKey: key},
		req, emptyPayloadHash, "sts", cred[2], signedAt)
	if err != nil {
		return nil, fmt.Errorf("re-sign token request: %w", err)
	}
	wu, err := url.Parse(want)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(wu.Query().Get("X-Amz-Signature")), []byte(got)) != 1 {
		return nil, errors.New("signature does not match (wrong credentials or cluster id)")
	}
	return &Presigned{AccessKeyID: cred[0], Region: cred[2], SignedAt: signedAt}, nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
