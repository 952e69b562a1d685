package awssim

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// lambdaAPIPrefix starts the Lambda REST API's paths.
const lambdaAPIPrefix = "/2016-08-19/"

// serveLambda answers GetAccountSettings (GET /2016-08-19/account-settings/,
// Lambda API reference): the account's concurrency limit
// (ConcurrentExecutions) and UnreservedConcurrentExecutions, the limit less
// every function's reserved concurrency.
func (s *Server) serveLambda(w http.ResponseWriter, r *http.Request, reqID string) {
	op := r.Method + " " + r.URL.Path
	if r.Method == http.MethodGet && strings.TrimSuffix(r.URL.Path, "/") == lambdaAPIPrefix+"account-settings" {
		op = "GetAccountSettings"
	}
	ferr, done := s.begin(r.Context(), "lambda", op, nil)
	fail := func(e *protocol.APIError) {
		done(e, 0)
		protocol.WriteError(w, protocol.RESTJSON, reqID, e, "")
	}
	if ferr != nil {
		fail(ferr)
		return
	}
	if ae := s.authorize(r, []iam.Target{{Action: "lambda:" + op, ARN: "*"}}, jsonDenied("AccessDeniedException", http.StatusForbidden)); ae != nil {
		fail(ae)
		return
	}
	if op != "GetAccountSettings" {
		fail(&protocol.APIError{Code: "InvalidRequestException", Status: http.StatusNotFound, Message: op + " is not simulated"})
		return
	}
	a := &s.acct
	a.mu.Lock()
	a.init()
	limit, reserved := a.lambdaLimit, a.lambdaReserved
	a.mu.Unlock()
	done(nil, http.StatusOK)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-RequestId", reqID)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"AccountLimit": map[string]any{"ConcurrentExecutions": limit, "UnreservedConcurrentExecutions": limit - reserved,
			"TotalCodeSize": 80530636800, "CodeSizeUnzipped": 262144000, "CodeSizeZipped": 52428800},
		"AccountUsage": map[string]any{"TotalCodeSize": 0, "FunctionCount": 0},
	})
}
