package awssim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// serveJSON serves the awsJson1_0/1_1 services (SQS, SSM, Pricing, EventBridge).
func (s *Server) serveJSON(w http.ResponseWriter, r *http.Request, reqID, service, typePrefix, op string, body []byte) {
	ferr, done := s.begin(r.Context(), service, op, jsonParams(body))
	if ferr != nil {
		done(ferr, 0)
		protocol.WriteError(w, protocol.JSON, reqID, ferr, typePrefix)
		return
	}
	if ae := s.authorize(r, s.jsonTargets(service, op, body), jsonDenied(deniedCode(service))); ae != nil {
		done(ae, 0)
		protocol.WriteError(w, protocol.JSON, reqID, ae, typePrefix)
		return
	}
	var out any
	var err error
	switch service {
	case "sqs":
		out, err = s.sqs.Handle(r.Context(), op, body)
	case "events":
		out, err = s.events.Handle(op, body)
	case "ssm":
		out, err = s.handleSSM(op, body)
	case "pricing":
		out, err = s.handlePricing(op, body)
	case "secretsmanager":
		out, err = s.handleSecretsManager(op, body)
	case "servicequotas":
		out, err = s.handleServiceQuotas(op, body)
	default:
		err = protocol.Errorf("UnknownOperationException", "service %s is not simulated", service)
	}
	if err != nil {
		ae := protocol.AsAPIError(err)
		done(ae, 0)
		protocol.WriteError(w, protocol.JSON, reqID, ae, typePrefix)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		ae := protocol.AsAPIError(fmt.Errorf("encode %s response: %w", op, err))
		done(ae, 0)
		protocol.WriteError(w, protocol.JSON, reqID, ae, typePrefix)
		return
	}
	done(nil, http.StatusOK)
	ct := r.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/x-amz-json") {
		ct = "application/x-amz-json-1.1"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Amzn-RequestId", reqID)
	_, _ = w.Write(b)
}

// jsonParams keeps the top-level scalar members of a JSON request for the call log.
func jsonParams(body []byte) map[string]string {
	var m map[string]any
	if json.Unmarshal(body, &m) != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		if k == "SecretString" {
			// The call log is for reading; a secret has no place in it.
			out[k] = "<redacted>"
			continue
		}
		switch x := v.(type) {
		case string:
			out[k] = x
		case float64, bool:
			out[k] = fmt.Sprint(x)
		case []any:
			parts := make([]string, 0, len(x))
			for _, e := range x {
				if s, ok := e.(string); ok {
					parts = append(parts, s)
				}
			}
			if len(parts) > 0 {
				out[k] = strings.Join(parts, ",")
			}
		}
	}
	return out
}
