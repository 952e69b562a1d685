package awssim

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/sigv4"
)

type principal struct {
	secret, arn string
}

// AddCredentials registers another access key and the caller ARN STS reports for it.
func (s *Server) AddCredentials(accessKeyID, secretAccessKey, callerARN string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.principals[accessKeyID] = principal{secret: secretAccessKey, arn: callerARN}
}

func (s *Server) principal(akid string) (principal, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.principals[akid]
	return p, ok
}

// serveSTS answers GetCallerIdentity for header-signed and presigned requests.
func (s *Server) serveSTS(w http.ResponseWriter, r *http.Request, reqID, action string, form url.Values) {
	ferr, done := s.begin(r.Context(), "sts", action, flatten(form))
	fail := func(e *protocol.APIError) {
		done(e, 0)
		protocol.WriteError(w, protocol.AWSQuery, reqID, e, "")
	}
	if ferr != nil {
		fail(ferr)
		return
	}
	if action == "DecodeAuthorizationMessage" {
		s.serveDecode(w, reqID, form.Get("EncodedMessage"), done)
		return
	}
	if action != "GetCallerIdentity" {
		fail(protocol.Errorf("InvalidAction", "Could not find operation %s for version 2011-06-15", action))
		return
	}
	var akid string
	if r.URL.Query().Get("X-Amz-Signature") != "" {
		full := "http://" + r.Host + r.URL.RequestURI()
		p, err := sigv4.VerifyPresignedSTS(full, r.Header.Get("x-k8s-aws-id"), s.opts.Now(), func(k string) (string, bool) {
			pr, ok := s.principal(k)
			return pr.secret, ok
		})
		if err != nil {
			fail(&protocol.APIError{Code: "SignatureDoesNotMatch", Message: err.Error(), Status: http.StatusForbidden})
			return
		}
		akid = p.AccessKeyID
	} else if auth := r.Header.Get("Authorization"); auth != "" {
		if i := strings.Index(auth, "Credential="); i >= 0 {
			akid, _, _ = strings.Cut(auth[i+len("Credential="):], "/")
		}
	}
	pr, ok := s.principal(akid)
	if !ok {
		fail(&protocol.APIError{Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid.", Status: http.StatusForbidden})
		return
	}
	done(nil, http.StatusOK)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-RequestId", reqID)
	fmt.Fprintf(w, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult><Arn>%s</Arn><UserId>%s</UserId><Account>%s</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></GetCallerIdentityResponse>`,
		pr.arn, userID(akid, pr.arn), accountOf(pr.arn), reqID)
}

// userID mimics STS: AROA...:session for assumed roles, the key id otherwise.
func userID(akid, arn string) string {
	if strings.Contains(arn, ":assumed-role/") {
		parts := strings.Split(arn, "/")
		return "AROA" + strings.ToUpper(akid[4:]) + ":" + parts[len(parts)-1]
	}
	return "AIDA" + strings.ToUpper(akid[4:])
}

func accountOf(arn string) string {
	parts := strings.Split(arn, ":")
	if len(parts) > 4 {
		return parts[4]
	}
	return ""
}

// serveDecode answers sts:DecodeAuthorizationMessage for the messages the
// simulator's own denials carry (iam.Message.Encode).
func (s *Server) serveDecode(w http.ResponseWriter, reqID, encoded string, done func(*protocol.APIError, int)) {
	m, err := iam.DecodeMessage(encoded)
	if err != nil {
		e := &protocol.APIError{Code: "InvalidAuthorizationMessageException", Message: err.Error(), Status: http.StatusBadRequest}
		done(e, 0)
		protocol.WriteError(w, protocol.AWSQuery, reqID, e, "")
		return
	}
	done(nil, http.StatusOK)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-RequestId", reqID)
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(m.JSON()))
	fmt.Fprintf(w, `<DecodeAuthorizationMessageResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><DecodeAuthorizationMessageResult><DecodedMessage>%s</DecodedMessage></DecodeAuthorizationMessageResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></DecodeAuthorizationMessageResponse>`,
		b.String(), reqID)
}
