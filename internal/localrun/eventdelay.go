package localrun

import "time"

// delayEvents makes EventBridge deliver the interruption rules' events to
// queueARN after a random delay of up to EventDelay (wall time), so they
// arrive late and out of order as EventBridge's asynchronous delivery
// allows (EventBridge user guide, "Event delivery from AWS services"). It
// returns the undo.
func (s *System) delayEvents(queueARN string) func() {
	bound := s.faults.o.EventDelay
	if bound <= 0 {
		return func() {}
	}
	scale := s.cloud.AWS.Options().TimeScale
	return s.cloud.AWS.DelayEventDelivery(func(target string) time.Duration {
		if target != queueARN {
			return 0
		}
		d := s.faults.upTo(bound)
		if d > 0 {
			s.faults.delayed.Add(1)
		}
		// The simulator's delays are its own time, TimeScale times faster
		// than the wall clock.
		return time.Duration(float64(d) * scale)
	})
}
