// Package protocol holds what every simulated AWS service shares: the API
// error type, request identification (service and operation) and the error
// envelopes of the AWS protocol families.
package protocol

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// APIError is an AWS service error as the SDK sees it: a code, a message and an HTTP status.
type APIError struct {
	Code    string
	Message string
	Status  int
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// Errorf builds a client (HTTP 400) error.
func Errorf(code, format string, args ...any) *APIError {
	return &APIError{Code: code, Message: fmt.Sprintf(format, args...), Status: http.StatusBadRequest}
}

// AsAPIError converts any error to an APIError; unknown errors become InternalError (500).
func AsAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		if ae.Status == 0 {
			ae.Status = http.StatusBadRequest
		}
		return ae
	}
	return &APIError{Code: "InternalError", Message: err.Error(), Status: http.StatusInternalServerError}
}

// Family is the wire protocol family of a service.
type Family int

const (
	EC2Query Family = iota // EC2: form request, XML response, <Response><Errors> errors
	AWSQuery               // STS: form request, XML response, <ErrorResponse> errors
	JSON                   // SSM, Pricing, SQS, EventBridge: X-Amz-Target + JSON
	RESTJSON               // EKS: REST paths, JSON bodies, X-Amzn-ErrorType
)

// ServiceFromRequest returns the SigV4 signing name of a request: the service
// element of the credential scope, from the Authorization header or, for
// presigned requests, the X-Amz-Credential query parameter.
func ServiceFromRequest(r *http.Request) string {
	cred := ""
	if auth := r.Header.Get("Authorization"); auth != "" {
		if i := strings.Index(auth, "Credential="); i >= 0 {
			cred = auth[i+len("Credential="):]
			if j := strings.IndexAny(cred, ", "); j >= 0 {
				cred = cred[:j]
			}
		}
	}
	if cred == "" {
		cred = r.URL.Query().Get("X-Amz-Credential")
	}
	parts := strings.Split(cred, "/")
	if len(parts) == 5 {
		return parts[3]
	}
	return ""
}

// WriteError renders err in the envelope of the protocol family.
func WriteError(w http.ResponseWriter, fam Family, requestID string, err *APIError, jsonTypePrefix string) {
	w.Header().Set("X-Amzn-RequestId", requestID)
	switch fam {
	case EC2Query:
		w.Header().Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(err.Status)
		fmt.Fprintf(w, `%s<Response><Errors><Error><Code>%s</Code><Message>%s</Message></Error></Errors><RequestID>%s</RequestID></Response>`,
			xml.Header, esc(err.Code), esc(err.Message), requestID)
	case AWSQuery:
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(err.Status)
		kind := "Sender"
		if err.Status >= 500 {
			kind = "Receiver"
		}
		fmt.Fprintf(w, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>%s</Type><Code>%s</Code><Message>%s</Message></Error><RequestId>%s</RequestId></ErrorResponse>`,
			kind, esc(err.Code), esc(err.Message), requestID)
	case JSON:
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(err.Status)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": jsonTypePrefix + err.Code, "message": err.Message})
	case RESTJSON:
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Amzn-ErrorType", err.Code)
		w.WriteHeader(err.Status)
		_ = json.NewEncoder(w).Encode(map[string]string{"message": err.Message})
	}
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
