package awssim

import (
	"sync"
	"time"
)

// Call is one API call the simulator served.
type Call struct {
	Seq       int
	Time      time.Time
	Service   string
	Operation string
	// Params are the request's parameters: query parameters for EC2/STS,
	// top-level scalar JSON members for JSON services, path values for EKS.
	Params map[string]string
	// ErrorCode is empty on success.
	ErrorCode string
	Status    int
	Duration  time.Duration
}

type callLog struct {
	mu    sync.Mutex
	calls []Call
}

func (l *callLog) add(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.Seq = len(l.calls) + 1
	l.calls = append(l.calls, c)
}

// Calls returns the calls served so far, optionally only those of one
// service and operation (empty strings match any).
func (s *Server) Calls(service, operation string) []Call {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	var out []Call
	for _, c := range s.log.calls {
		if (service == "" || c.Service == service) && (operation == "" || c.Operation == operation) {
			out = append(out, c)
		}
	}
	return out
}

// ResetCalls clears the call log.
func (s *Server) ResetCalls() {
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	s.log.calls = nil
}
