package awssim

import (
	"net/http"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Fault makes matching calls fail or slow down. Service is the SigV4 signing
// name ("ec2", "sqs", "ssm", "pricing", "events", "eks", "sts"); Operation the
// API name ("CreateFleet"). Empty matches any.
type Fault struct {
	Service   string
	Operation string
	// Code and Message of the error returned; empty Code means latency only.
	Code    string
	Message string
	// Status is the HTTP status of the error (default 400).
	Status int
	// Latency is added before the call is served (or fails).
	Latency time.Duration
	// Skip lets the first Skip matching calls through untouched.
	Skip int
	// Times limits how many matching calls are affected after Skip (0 = all).
	Times int
	// LoseResponse lets the call take effect and then answers with Code
	// instead of its response, as when a response is lost on the way back
	// (EC2 calls only; other services ignore it and fail before serving).
	LoseResponse bool
}

type faultState struct {
	Fault
	seen, hit int
}

type faults struct {
	mu   sync.Mutex
	list []*faultState
}

// InjectFault adds a fault; the returned func removes it.
func (s *Server) InjectFault(f Fault) (remove func()) {
	fs := &faultState{Fault: f}
	s.faults.mu.Lock()
	s.faults.list = append(s.faults.list, fs)
	s.faults.mu.Unlock()
	return func() {
		s.faults.mu.Lock()
		defer s.faults.mu.Unlock()
		for i, x := range s.faults.list {
			if x == fs {
				s.faults.list = append(s.faults.list[:i], s.faults.list[i+1:]...)
				return
			}
		}
	}
}

// FailNth makes only the nth (1-based) matching call fail with code.
func (s *Server) FailNth(service, operation string, n int, code string) (remove func()) {
	return s.InjectFault(Fault{Service: service, Operation: operation, Code: code, Message: "injected failure", Skip: n - 1, Times: 1})
}

// Throttle makes the next `times` matching calls fail with the service's
// throttling error (RequestLimitExceeded/503 for EC2, ThrottlingException otherwise).
func (s *Server) Throttle(service, operation string, times int) (remove func()) {
	f := Fault{Service: service, Operation: operation, Code: "ThrottlingException", Message: "Rate exceeded", Times: times}
	if service == "ec2" {
		f.Code, f.Message, f.Status = "RequestLimitExceeded", "Request limit exceeded.", http.StatusServiceUnavailable
	}
	return s.InjectFault(f)
}

// ClearFaults removes every injected fault.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.list = nil
}

// check returns the latency to add and the error to return for one call,
// and whether that error replaces the response of a served call.
func (f *faults) check(service, operation string) (time.Duration, *protocol.APIError, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var latency time.Duration
	for _, fs := range f.list {
		if fs.Service != "" && fs.Service != service || fs.Operation != "" && fs.Operation != operation {
			continue
		}
		fs.seen++
		if fs.seen <= fs.Skip || fs.Times > 0 && fs.hit >= fs.Times {
			continue
		}
		fs.hit++
		latency += fs.Latency
		if fs.Code != "" {
			st := fs.Status
			if st == 0 {
				st = http.StatusBadRequest
			}
			return latency, &protocol.APIError{Code: fs.Code, Message: fs.Message, Status: st}, fs.LoseResponse
		}
	}
	return latency, nil, false
}
