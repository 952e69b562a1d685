// Package meettest holds calls until a number of them are in flight
// together, for tests that a pass makes its reads concurrently: called one
// after the other, each waits its full patience and the most seen in
// flight stays at one.
package meettest

import (
	"sync"
	"sync/atomic"
	"time"
)

// Meeting counts the calls in flight and holds each until Want are in
// flight together, or Patience passes.
type Meeting struct {
	want     int32
	patience time.Duration

	inFlight, most atomic.Int32
	all            chan struct{}
	once           sync.Once
}

// New is a meeting of want calls, each waiting at most a second.
func New(want int32) *Meeting {
	return &Meeting{want: want, patience: time.Second, all: make(chan struct{})}
}

// Attend is one call: it returns once want calls are in flight together,
// or after the patience.
func (m *Meeting) Attend() {
	now := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for most := m.most.Load(); now > most && !m.most.CompareAndSwap(most, now); most = m.most.Load() {
	}
	if now >= m.want {
		m.once.Do(func() { close(m.all) })
	}
	select {
	case <-m.all:
	case <-time.After(m.patience):
	}
}

// Most is the most calls seen in flight at once.
func (m *Meeting) Most() int32 { return m.most.Load() }

// Met says whether want calls were ever in flight together.
func (m *Meeting) Met() bool { return m.Most() >= m.want }
