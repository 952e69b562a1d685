package localrun

import (
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// atLeastOnce is a standard queue's delivery as the SQS developer guide
// describes it ("Amazon SQS at-least-once delivery": a copy of a message
// may be delivered again, even after it was deleted; best-effort ordering:
// messages may arrive out of order). A duplicate comes in the same batch
// or in a later one of the same event source.
type atLeastOnce struct {
	faults *faults
	mu     sync.Mutex
	later  []events.SQSMessage
}

// batch is what the function gets for the messages just received: them,
// the duplicates held back from earlier batches, and now and then a
// duplicate of one of them; shuffled, and at most size records (the rest
// waits for the next batch).
func (a *atLeastOnce) batch(recs []events.SQSMessage, size int) []events.SQSMessage {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append(a.later, recs...)
	a.later = nil
	for _, r := range recs {
		if !a.faults.chance(a.faults.o.DuplicateRate) {
			continue
		}
		a.faults.duplicates.Add(1)
		if a.faults.chance(0.5) {
			out = append(out, r)
		} else {
			a.later = append(a.later, r)
		}
	}
	a.faults.shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	if len(out) > size {
		a.later = append(a.later, out[size:]...)
		out = out[:size]
	}
	return out
}

// wait is how long the event source's next receive may wait for
// messages: not long while duplicates are held back, so they come soon
// even when the queue is idle.
func (a *atLeastOnce) wait(longPoll int32) int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.later) > 0 {
		return 1
	}
	return longPoll
}
