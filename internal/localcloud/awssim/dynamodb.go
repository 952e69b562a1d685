package awssim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// dynamoTargetPrefix is DynamoDB's X-Amz-Target prefix.
const dynamoTargetPrefix = "DynamoDB_20120810"

// SetDynamoDBUpstream makes the simulator the DynamoDB endpoint: it
// authorizes each request under the caller's role, then forwards it to
// dynalite at url. The simulator serves no DynamoDB of its own; without an
// upstream, DynamoDB requests fail.
func (s *Server) SetDynamoDBUpstream(url string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dynamoUpstream = url
}

// upstreamIdle is how many idle connections to dynalite the simulator
// keeps: a provisioner's launches make 32 DynamoDB calls at once (more
// with several functions running), and net/http's default of 2 closed
// the rest after each call and dialed anew, a TCP connection and a new
// Node.js socket per call, which cut the local DynamoDB to a third of
// what it answers on kept connections. AWS keeps no such hop.
const upstreamIdle = 256

func upstreamTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = upstreamIdle, upstreamIdle
	// Closed before Node.js closes them (its keepAliveTimeout is 5 s), so
	// a call is not sent on a connection dynalite is closing.
	t.IdleConnTimeout = 4 * time.Second
	return t
}

func (s *Server) serveDynamoDB(w http.ResponseWriter, r *http.Request, reqID, op string, body []byte) {
	if ae := s.authorize(r, s.dynamoTargets(op, body), jsonDenied("AccessDeniedException", http.StatusBadRequest)); ae != nil {
		protocol.WriteError(w, protocol.JSON, reqID, ae, "com.amazonaws.dynamodb.v20120810#")
		return
	}
	s.mu.Lock()
	upstream := s.dynamoUpstream
	s.mu.Unlock()
	if upstream == "" {
		protocol.WriteError(w, protocol.JSON, reqID, protocol.Errorf("UnknownOperationException", "the local cloud runs no DynamoDB"), "")
		return
	}
	// Detached from the caller: dynalite dies when a client aborts a
	// request mid-flight (its request error handler throws), and callers
	// that crash on purpose abort theirs. A caller gone is answered into
	// the void, as AWS would.
	out, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		protocol.WriteError(w, protocol.JSON, reqID, protocol.AsAPIError(err), "")
		return
	}
	out.Header = r.Header.Clone()
	resp, err := s.dynamoClient.Do(out)
	if err != nil {
		// The caller sees a dropped connection, as from a failed endpoint.
		http.Error(w, "dynalite: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
