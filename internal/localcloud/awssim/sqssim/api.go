package sqssim

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

type sendEntry struct {
	Id                string
	MessageBody       string
	DelaySeconds      *int
	MessageAttributes map[string]MessageAttribute
}

type wireMessage struct {
	MessageId              string
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string           `json:",omitempty"`
	MessageAttributes      map[string]MessageAttribute `json:",omitempty"`
	MD5OfMessageAttributes string                      `json:",omitempty"`
}

type batchFailure struct {
	Id, Code, Message string
	SenderFault       bool
}

// request is the union of the SQS operations' JSON inputs.
type request struct {
	QueueName, QueueUrl, MessageBody, ReceiptHandle string
	Attributes                                      map[string]string
	AttributeNames, MessageSystemAttributeNames     []string
	MessageAttributeNames                           []string
	MessageAttributes                               map[string]MessageAttribute
	DelaySeconds, MaxNumberOfMessages               *int
	VisibilityTimeout, WaitTimeSeconds              *int
	Entries                                         []json.RawMessage
}

// Handle runs one SQS JSON-protocol operation.
func (s *Service) Handle(ctx context.Context, op string, body []byte) (any, error) {
	var in request
	if len(body) > 0 {
		if err := json.Unmarshal(body, &in); err != nil {
			return nil, protocol.Errorf("SerializationException", "invalid JSON body: %v", err)
		}
	}
	switch op {
	case "CreateQueue":
		u, err := s.CreateQueue(in.QueueName, in.Attributes)
		if err != nil {
			return nil, err
		}
		return map[string]string{"QueueUrl": u}, nil
	case "GetQueueUrl":
		return s.getQueueURL(in.QueueName)
	case "ListQueues":
		return s.listQueues(), nil
	case "DeleteQueue":
		return s.withQueue(in.QueueUrl, func(q *queue) { delete(s.queues, q.name) })
	case "GetQueueAttributes":
		return s.getAttributes(in.QueueUrl, in.AttributeNames)
	case "SetQueueAttributes":
		return s.setAttributes(in.QueueUrl, in.Attributes)
	case "PurgeQueue":
		return s.withQueue(in.QueueUrl, func(q *queue) { q.msgs = nil })
	case "SendMessage":
		return s.send(in.QueueUrl, sendEntry{MessageBody: in.MessageBody, DelaySeconds: in.DelaySeconds, MessageAttributes: in.MessageAttributes})
	case "SendMessageBatch":
		return s.sendBatch(in.QueueUrl, in.Entries)
	case "ReceiveMessage":
		return s.receiveAPI(ctx, in.QueueUrl, in.MaxNumberOfMessages, in.VisibilityTimeout, in.WaitTimeSeconds,
			append(in.AttributeNames, in.MessageSystemAttributeNames...), in.MessageAttributeNames)
	case "DeleteMessage":
		s.mu.Lock()
		defer s.mu.Unlock()
		return struct{}{}, s.deleteMessage(in.QueueUrl, in.ReceiptHandle)
	case "DeleteMessageBatch":
		return s.deleteBatch(in.QueueUrl, in.Entries)
	case "ChangeMessageVisibility":
		if in.VisibilityTimeout == nil {
			return nil, protocol.Errorf("MissingParameter", "The request must contain the parameter VisibilityTimeout.")
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		return struct{}{}, s.changeVisibility(in.QueueUrl, in.ReceiptHandle, *in.VisibilityTimeout)
	}
	return nil, protocol.Errorf("UnsupportedOperation", "operation %s is not simulated", op)
}

func (s *Service) getQueueURL(name string) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.lookup(name); err != nil {
		return nil, err
	}
	return map[string]string{"QueueUrl": s.queueURL(name)}, nil
}

func (s *Service) listQueues() any {
	s.mu.Lock()
	defer s.mu.Unlock()
	urls := []string{}
	for name := range s.queues {
		urls = append(urls, s.queueURL(name))
	}
	return map[string][]string{"QueueUrls": urls}
}

// withQueue runs f on the queue at url under the lock: the operations
// whose answer is empty.
func (s *Service) withQueue(url string, f func(q *queue)) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(url)
	if err != nil {
		return nil, err
	}
	f(q)
	return struct{}{}, nil
}

func (s *Service) setAttributes(url string, attrs map[string]string) (any, error) {
	rp, err := s.validateAttrs(attrs)
	if err != nil {
		return nil, err
	}
	return s.withQueue(url, func(q *queue) {
		for k, v := range attrs {
			q.attrs[k] = v
		}
		if _, ok := attrs["RedrivePolicy"]; ok {
			q.redrive = rp
		}
		q.modified = s.cfg.Now()
	})
}

func (s *Service) getAttributes(url string, names []string) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(url)
	if err != nil {
		return nil, err
	}
	vis, inflight, delayed := s.counts(q)
	all := map[string]string{
		"QueueArn":                              s.QueueARN(q.name),
		"ApproximateNumberOfMessages":           strconv.Itoa(vis),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(inflight),
		"ApproximateNumberOfMessagesDelayed":    strconv.Itoa(delayed),
		"CreatedTimestamp":                      strconv.FormatInt(q.created.Unix(), 10),
		"LastModifiedTimestamp":                 strconv.FormatInt(q.modified.Unix(), 10),
		"VisibilityTimeout":                     strconv.Itoa(q.intAttr("VisibilityTimeout", 30)),
		"MessageRetentionPeriod":                strconv.Itoa(q.intAttr("MessageRetentionPeriod", 345600)),
		"DelaySeconds":                          strconv.Itoa(q.intAttr("DelaySeconds", 0)),
		"ReceiveMessageWaitTimeSeconds":         strconv.Itoa(q.intAttr("ReceiveMessageWaitTimeSeconds", 0)),
		"MaximumMessageSize":                    strconv.Itoa(q.intAttr("MaximumMessageSize", 262144)),
	}
	for k, v := range q.attrs {
		if _, ok := all[k]; !ok {
			all[k] = v
		}
	}
	out := map[string]string{}
	for _, n := range names {
		if n == "All" {
			out = all
			break
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	return map[string]any{"Attributes": out}, nil
}

func (s *Service) send(url string, e sendEntry) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.lookup(url)
	if err != nil {
		return nil, err
	}
	if e.MessageBody == "" {
		return nil, protocol.Errorf("MissingParameter", "The request must contain the parameter MessageBody.")
	}
	if len(e.MessageBody) > q.intAttr("MaximumMessageSize", 262144) {
		return nil, protocol.Errorf("InvalidParameterValue", "One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", q.intAttr("MaximumMessageSize", 262144))
	}
	delay := -1
	if e.DelaySeconds != nil {
		if *e.DelaySeconds < 0 || *e.DelaySeconds > 900 {
			return nil, protocol.Errorf("InvalidParameterValue", "Value %d for parameter DelaySeconds is invalid. Reason: must be between 0 and 900, if provided.", *e.DelaySeconds)
		}
		delay = *e.DelaySeconds
	}
	m := s.enqueue(q, e.MessageBody, delay, e.MessageAttributes)
	out := map[string]string{"MessageId": m.id, "MD5OfMessageBody": m.md5}
	if m.attrMD5 != "" {
		out["MD5OfMessageAttributes"] = m.attrMD5
	}
	return out, nil
}

func (s *Service) sendBatch(url string, raw []json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, protocol.Errorf("EmptyBatchRequest", "There should be at least one SendMessageBatchRequestEntry in the request.")
	}
	if len(raw) > 10 {
		return nil, protocol.Errorf("TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent %d.", len(raw))
	}
	ok := []map[string]string{}
	failed := []batchFailure{}
	seen := map[string]bool{}
	for _, r := range raw {
		var e sendEntry
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, protocol.Errorf("SerializationException", "invalid entry: %v", err)
		}
		if seen[e.Id] {
			return nil, protocol.Errorf("BatchEntryIdsNotDistinct", "Id %s repeated.", e.Id)
		}
		seen[e.Id] = true
		res, err := s.send(url, e)
		if err != nil {
			ae := protocol.AsAPIError(err)
			if ae.Code == "QueueDoesNotExist" {
				return nil, ae
			}
			failed = append(failed, batchFailure{Id: e.Id, Code: ae.Code, Message: ae.Message, SenderFault: true})
			continue
		}
		m := res.(map[string]string)
		m["Id"] = e.Id
		ok = append(ok, m)
	}
	return map[string]any{"Successful": ok, "Failed": failed}, nil
}

func (s *Service) receiveAPI(ctx context.Context, url string, maxN, vis, wait *int, sysAttrs, msgAttrs []string) (any, error) {
	s.mu.Lock()
	q, err := s.lookup(url)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	n, v, w := 1, q.intAttr("VisibilityTimeout", 30), q.intAttr("ReceiveMessageWaitTimeSeconds", 0)
	s.mu.Unlock()
	if maxN != nil {
		if *maxN < 1 || *maxN > 10 {
			return nil, protocol.Errorf("InvalidParameterValue", "Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", *maxN)
		}
		n = *maxN
	}
	if vis != nil {
		v = *vis
	}
	if wait != nil {
		if *wait < 0 || *wait > 20 {
			return nil, protocol.Errorf("InvalidParameterValue", "Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *wait)
		}
		w = *wait
	}
	msgs := s.receiveWait(ctx, q, n, v, w)
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []wireMessage{}
	for _, m := range msgs {
		wm := wireMessage{MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body}
		all := map[string]string{
			"ApproximateReceiveCount":          strconv.Itoa(m.receives),
			"SentTimestamp":                    strconv.FormatInt(m.sent.UnixMilli(), 10),
			"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
			"SenderId":                         "AIDALOCALCLOUD",
		}
		for _, a := range sysAttrs {
			if a == "All" {
				wm.Attributes = all
				break
			}
			if v, ok := all[a]; ok {
				if wm.Attributes == nil {
					wm.Attributes = map[string]string{}
				}
				wm.Attributes[a] = v
			}
		}
		if len(msgAttrs) > 0 && len(m.attrs) > 0 {
			wm.MessageAttributes = m.attrs
			wm.MD5OfMessageAttributes = m.attrMD5
		}
		out = append(out, wm)
	}
	return map[string]any{"Messages": out}, nil
}

func (s *Service) deleteMessage(url, handle string) error {
	q, err := s.lookup(url)
	if err != nil {
		return err
	}
	i, m := q.byReceipt(handle)
	if m == nil {
		return protocol.Errorf("ReceiptHandleIsInvalid", "The input receipt handle \"%s\" is not a valid receipt handle.", handle)
	}
	q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
	return nil
}

func (s *Service) changeVisibility(url, handle string, timeout int) error {
	q, err := s.lookup(url)
	if err != nil {
		return err
	}
	if timeout < 0 || timeout > 43200 {
		return protocol.Errorf("InvalidParameterValue", "Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and 43200.", timeout)
	}
	_, m := q.byReceipt(handle)
	if m == nil {
		return protocol.Errorf("ReceiptHandleIsInvalid", "The input receipt handle \"%s\" is not a valid receipt handle.", handle)
	}
	if !m.inflight {
		return protocol.Errorf("MessageNotInflight", "The message referred to is not in flight.")
	}
	m.visibleAt = time.Now().Add(s.wall(timeout))
	if timeout == 0 {
		m.inflight = false
		s.broadcast()
	}
	return nil
}

func (s *Service) deleteBatch(url string, raw []json.RawMessage) (any, error) {
	if len(raw) == 0 {
		return nil, protocol.Errorf("EmptyBatchRequest", "There should be at least one DeleteMessageBatchRequestEntry in the request.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.lookup(url); err != nil {
		return nil, err
	}
	ok := []map[string]string{}
	failed := []batchFailure{}
	for _, r := range raw {
		var e struct{ Id, ReceiptHandle string }
		if err := json.Unmarshal(r, &e); err != nil {
			return nil, protocol.Errorf("SerializationException", "invalid entry: %v", err)
		}
		if err := s.deleteMessage(url, e.ReceiptHandle); err != nil {
			ae := protocol.AsAPIError(err)
			failed = append(failed, batchFailure{Id: e.Id, Code: ae.Code, Message: ae.Message, SenderFault: true})
			continue
		}
		ok = append(ok, map[string]string{"Id": e.Id})
	}
	return map[string]any{"Successful": ok, "Failed": failed}, nil
}
