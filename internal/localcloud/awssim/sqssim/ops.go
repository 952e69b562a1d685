package sqssim

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

func parseRedrive(raw string) (*redrivePolicy, error) {
	var rp redrivePolicy
	if err := json.Unmarshal([]byte(raw), &rp); err != nil {
		return nil, err
	}
	switch v := rp.MaxReceiveCount.(type) {
	case float64:
		rp.max = int(v)
	case string:
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, fmt.Errorf("maxReceiveCount %q is not a number", v)
		}
		rp.max = n
	default:
		return nil, fmt.Errorf("maxReceiveCount is required")
	}
	if rp.max < 1 || rp.max > 1000 || !strings.HasPrefix(rp.DeadLetterTargetArn, "arn:aws:sqs:") {
		return nil, fmt.Errorf("need deadLetterTargetArn (an SQS queue ARN) and maxReceiveCount 1..1000")
	}
	return &rp, nil
}

func (s *Service) lookup(queueURL string) (*queue, error) {
	name := queueURL[strings.LastIndex(queueURL, "/")+1:]
	if q := s.queues[name]; q != nil && name != "" {
		return q, nil
	}
	return nil, &protocol.APIError{Code: "QueueDoesNotExist", Message: "The specified queue does not exist.", Status: 400}
}

// CreateQueue creates a queue (idempotent when attributes are equal) and returns its URL.
func (s *Service) CreateQueue(name string, attrs map[string]string) (string, error) {
	if name == "" || len(name) > 80 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_") != "" {
		return "", protocol.Errorf("InvalidParameterValue", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	rp, err := s.validateAttrs(attrs)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.queues[name]; q != nil {
		for k, v := range attrs {
			if q.attrs[k] != v {
				return "", protocol.Errorf("QueueNameExists", "A queue already exists with the same name and a different value for attribute %s", k)
			}
		}
		return s.queueURL(name), nil
	}
	now := s.cfg.Now()
	q := &queue{name: name, attrs: map[string]string{}, created: now, modified: now, redrive: rp}
	for k, v := range attrs {
		q.attrs[k] = v
	}
	s.queues[name] = q
	return s.queueURL(name), nil
}

// Send enqueues a message (Go API, as an AWS service integration would).
func (s *Service) Send(queueName, body string, delaySeconds int) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[queueName]
	if q == nil {
		return "", fmt.Errorf("send to %s: no such queue", queueName)
	}
	return s.enqueue(q, body, delaySeconds, nil).id, nil
}

// Depth returns the visible, in-flight and delayed message counts of a queue.
func (s *Service) Depth(queueName string) (visible, inflight, delayed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[queueName]
	if q == nil {
		return 0, 0, 0
	}
	return s.counts(q)
}

func (s *Service) counts(q *queue) (visible, inflight, delayed int) {
	now := time.Now()
	s.expire(q, now)
	for _, m := range q.msgs {
		switch {
		case !m.visibleAt.After(now):
			visible++
		case m.inflight:
			inflight++
		default:
			delayed++
		}
	}
	return
}

// expire drops messages older than the retention period. Caller holds mu.
func (s *Service) expire(q *queue, now time.Time) {
	keep := q.msgs[:0]
	ret := s.wall(q.intAttr("MessageRetentionPeriod", 345600))
	for _, m := range q.msgs {
		if now.Sub(m.firstWall()) < ret {
			keep = append(keep, m)
		}
	}
	q.msgs = keep
}

func (m *message) firstWall() time.Time { return m.enqueuedWall }

func (s *Service) enqueue(q *queue, body string, delay int, attrs map[string]MessageAttribute) *message {
	if delay < 0 {
		delay = q.intAttr("DelaySeconds", 0)
	}
	now := time.Now()
	m := &message{id: s.uuid(), body: body, md5: md5Hex(body), attrs: attrs, attrMD5: md5Attributes(attrs),
		sent: s.cfg.Now(), visibleAt: now.Add(s.wall(delay)), enqueuedWall: now}
	q.msgs = append(q.msgs, m)
	if delay > 0 {
		time.AfterFunc(s.wall(delay), func() {
			s.mu.Lock()
			s.broadcast()
			s.mu.Unlock()
		})
	} else {
		s.broadcast()
	}
	return m
}

// receive takes up to max visible messages, redriving those past maxReceiveCount. Caller holds mu.
func (s *Service) receive(q *queue, max, visibility int) []*message {
	now := time.Now()
	s.expire(q, now)
	var out []*message
	for i := 0; i < len(q.msgs) && len(out) < max; i++ {
		m := q.msgs[i]
		if m.visibleAt.After(now) {
			continue
		}
		if q.redrive != nil && m.receives >= q.redrive.max {
			if dlq := s.queueByARN(q.redrive.DeadLetterTargetArn); dlq != nil {
				q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
				i--
				m.inflight, m.visibleAt, m.receipt = false, now, ""
				dlq.msgs = append(dlq.msgs, m)
				continue
			}
		}
		m.receives++
		if m.receives == 1 {
			m.firstReceive = s.cfg.Now()
		}
		m.inflight = true
		m.visibleAt = now.Add(s.wall(visibility))
		m.receipt = fmt.Sprintf("%s#%d#%s", q.name, m.receives, s.uuid())
		if visibility > 0 {
			time.AfterFunc(s.wall(visibility), func() {
				s.mu.Lock()
				s.broadcast()
				s.mu.Unlock()
			})
		}
		out = append(out, m)
	}
	return out
}

func (s *Service) queueByARN(arn string) *queue {
	return s.queues[arn[strings.LastIndex(arn, ":")+1:]]
}

func (q *queue) byReceipt(h string) (int, *message) {
	for i, m := range q.msgs {
		if m.receipt != "" && m.receipt == h {
			return i, m
		}
	}
	return -1, nil
}

// ReceiveWait long-polls a queue for up to wait (simulated time).
func (s *Service) receiveWait(ctx context.Context, q *queue, max, visibility int, wait int) []*message {
	deadline := time.Now().Add(s.wall(wait))
	for {
		s.mu.Lock()
		msgs := s.receive(q, max, visibility)
		wake := s.wake
		s.mu.Unlock()
		if len(msgs) > 0 || wait == 0 {
			return msgs
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil
		}
		t := time.NewTimer(left)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
		case <-s.closed:
		}
		t.Stop()
		if ctx.Err() != nil {
			return nil
		}
		select {
		case <-s.closed:
			return nil
		default:
		}
	}
}
