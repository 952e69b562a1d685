package localrun

import (
	"errors"
	"sync"
)

// errorLog keeps the first few distinct errors for the failure report.
type errorLog struct {
	mu   sync.Mutex
	errs []error
	seen map[string]bool
}

func (l *errorLog) add(err error) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string]bool{}
	}
	if l.seen[err.Error()] {
		return false
	}
	l.seen[err.Error()] = true
	if len(l.errs) < 20 {
		l.errs = append(l.errs, err)
	}
	return true
}

func (l *errorLog) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}
