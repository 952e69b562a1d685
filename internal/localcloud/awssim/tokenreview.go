package awssim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	authv1 "k8s.io/api/authentication/v1"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/sigv4"
	"github.com/nodewright/nodewright/internal/wildcard"
)

const tokenReviewPath = "/_localcloud/tokenreview"

// EKSTokenPrefix starts every EKS bearer token.
const EKSTokenPrefix = "k8s-aws-v1."

// Identity maps AWS callers to a Kubernetes user, like an EKS access entry.
type Identity struct {
	// ARN is the canonical caller ARN (arn:aws:iam::<acct>:role/<name> for
	// assumed roles); * and ? are wildcards.
	ARN string
	// Username defaults to the canonical ARN; {{SessionName}} and
	// {{AccountID}} are substituted.
	Username string
	Groups   []string
}

// TokenReviewURL is the endpoint for kube-apiserver's
// --authentication-token-webhook-config-file.
func (s *Server) TokenReviewURL() string { return s.URL() + tokenReviewPath }

func (s *Server) serveTokenReview(w http.ResponseWriter, r *http.Request) {
	var review authv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, "decode TokenReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	user, err := s.authenticate(review.Spec.Token)
	review.APIVersion, review.Kind = "authentication.k8s.io/v1", "TokenReview"
	if err != nil {
		review.Status = authv1.TokenReviewStatus{Authenticated: false, Error: err.Error()}
	} else {
		review.Status = authv1.TokenReviewStatus{Authenticated: true, User: *user}
	}
	s.log.add(Call{Time: s.opts.Now(), Service: "tokenreview", Operation: "TokenReview",
		Params: map[string]string{"username": review.Status.User.Username}, ErrorCode: review.Status.Error, Status: http.StatusOK})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// authenticate validates an EKS token: k8s-aws-v1. + base64url (no padding)
// of a presigned STS GetCallerIdentity URL signed for this cluster.
func (s *Server) authenticate(token string) (*authv1.UserInfo, error) {
	enc, ok := strings.CutPrefix(token, EKSTokenPrefix)
	if !ok {
		return nil, fmt.Errorf("token is not an EKS token (missing %s prefix)", EKSTokenPrefix)
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("token payload is not base64url without padding: %w", err)
	}
	p, err := sigv4.VerifyPresignedSTS(string(raw), s.opts.ClusterName, s.opts.Now(), func(k string) (string, bool) {
		pr, ok := s.principal(k)
		return pr.secret, ok
	})
	if err != nil {
		return nil, fmt.Errorf("invalid EKS token: %w", err)
	}
	pr, _ := s.principal(p.AccessKeyID)
	canonical, session := canonicalARN(pr.arn)
	acct := accountOf(canonical)
	for _, id := range s.opts.Identities {
		if !globMatch(id.ARN, canonical) {
			continue
		}
		name := id.Username
		if name == "" {
			name = canonical
		}
		name = strings.NewReplacer("{{SessionName}}", session, "{{AccountID}}", acct).Replace(name)
		return &authv1.UserInfo{
			Username: name, UID: "aws-iam-authenticator:" + acct + ":" + userID(p.AccessKeyID, pr.arn),
			Groups: append([]string(nil), id.Groups...),
			Extra:  map[string]authv1.ExtraValue{"arn": {pr.arn}, "canonicalArn": {canonical}, "accountId": {acct}, "sessionName": {session}},
		}, nil
	}
	return nil, fmt.Errorf("caller %s is not mapped to a Kubernetes user", canonical)
}

// globMatch matches * (any run, including '/') and ? wildcards.
func globMatch(pattern, s string) bool { return wildcard.Match(pattern, s) }

// canonicalARN turns an assumed-role session ARN into its role ARN.
func canonicalARN(arn string) (canonical, session string) {
	if i := strings.Index(arn, ":assumed-role/"); i >= 0 && strings.HasPrefix(arn, "arn:aws:sts::") {
		acct := strings.TrimPrefix(arn[:i], "arn:aws:sts::")
		rest := strings.Split(arn[i+len(":assumed-role/"):], "/")
		if len(rest) >= 2 {
			return fmt.Sprintf("arn:aws:iam::%s:role/%s", acct, rest[0]), rest[len(rest)-1]
		}
	}
	return arn, ""
}
