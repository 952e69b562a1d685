package meettest

import (
	"sync"
	"testing"
	"time"
)

// TestTogetherMeet: calls made at once all return as soon as the last is
// in flight, and the meeting says they met.
func TestTogetherMeet(t *testing.T) {
	m := New(3)
	start := time.Now()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(m.Attend)
	}
	wg.Wait()
	if !m.Met() || m.Most() != 3 {
		t.Errorf("met %v, most %d; want true and 3", m.Met(), m.Most())
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Errorf("calls in flight together waited %s", d)
	}
}

// TestOneAfterAnotherDoNotMeet: calls one after the other each wait the
// patience, and the meeting says they did not meet.
func TestOneAfterAnotherDoNotMeet(t *testing.T) {
	m := New(2)
	m.patience = 10 * time.Millisecond
	m.Attend()
	m.Attend()
	if m.Met() || m.Most() != 1 {
		t.Errorf("met %v, most %d; want false and 1", m.Met(), m.Most())
	}
}
