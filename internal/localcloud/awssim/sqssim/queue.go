// Package sqssim is an in-memory SQS: standard queues with delays,
// visibility timeouts, long polling and redrive to a dead-letter queue.
// Durations are simulated time, divided by Config.Scale on the wall clock.
package sqssim

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Config configures the service.
type Config struct {
	Region, Account string
	Now             func() time.Time // timestamps reported to clients
	Scale           float64          // time scale (>1 is faster)
	Seed            uint64
}

// Service holds every queue. Safe for concurrent use.
type Service struct {
	cfg     Config
	mu      sync.Mutex
	rng     *rand.Rand
	baseURL string
	queues  map[string]*queue
	wake    chan struct{} // closed and replaced whenever a message may have become receivable
	closed  chan struct{}
}

type queue struct {
	name     string
	attrs    map[string]string
	created  time.Time
	msgs     []*message
	redrive  *redrivePolicy
	modified time.Time
}

type redrivePolicy struct {
	DeadLetterTargetArn string `json:"deadLetterTargetArn"`
	MaxReceiveCount     any    `json:"maxReceiveCount"`
	max                 int
}

type message struct {
	id, body, md5, attrMD5 string
	attrs                  map[string]MessageAttribute
	sent                   time.Time // reported
	visibleAt              time.Time // wall clock
	receipt                string
	receives               int
	firstReceive           time.Time
	inflight               bool
	enqueuedWall           time.Time
}

// MessageAttribute is an SQS message attribute value.
type MessageAttribute struct {
	DataType    string `json:"DataType"`
	StringValue string `json:"StringValue,omitempty"`
	BinaryValue []byte `json:"BinaryValue,omitempty"`
}

// New creates an empty service.
func New(cfg Config) *Service {
	if cfg.Scale <= 0 {
		cfg.Scale = 1
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 7)), queues: map[string]*queue{}, wake: make(chan struct{}), closed: make(chan struct{}), baseURL: "http://localhost"}
}

// SetBaseURL sets the endpoint that queue URLs start with.
func (s *Service) SetBaseURL(u string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.baseURL = u
}

// Close wakes and ends every long poll.
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
}

func (s *Service) wall(sec int) time.Duration {
	return time.Duration(float64(sec) * float64(time.Second) / s.cfg.Scale)
}

// broadcast wakes long polls. Caller holds mu.
func (s *Service) broadcast() {
	close(s.wake)
	s.wake = make(chan struct{})
}

func (s *Service) queueURL(name string) string {
	return fmt.Sprintf("%s/%s/%s", s.baseURL, s.cfg.Account, name)
}

// QueueARN returns the ARN of a queue name.
func (s *Service) QueueARN(name string) string {
	return fmt.Sprintf("arn:aws:sqs:%s:%s:%s", s.cfg.Region, s.cfg.Account, name)
}

func (s *Service) uuid() string {
	a, b := s.rng.Uint64(), s.rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(a>>32), uint16(a>>16), uint16(a)&0xfff, uint16(b>>48)&0xfff, b&0xffffffffffff)
}

var attrLimits = map[string][2]int{
	"VisibilityTimeout": {0, 43200}, "MessageRetentionPeriod": {60, 1209600}, "DelaySeconds": {0, 900},
	"ReceiveMessageWaitTimeSeconds": {0, 20}, "MaximumMessageSize": {1024, 262144},
}

var otherAttrs = map[string]bool{"RedrivePolicy": true, "Policy": true, "KmsMasterKeyId": true, "KmsDataKeyReusePeriodSeconds": true, "SqsManagedSseEnabled": true, "RedriveAllowPolicy": true}

func (s *Service) validateAttrs(attrs map[string]string) (*redrivePolicy, error) {
	for k, v := range attrs {
		if lim, ok := attrLimits[k]; ok {
			n, err := strconv.Atoi(v)
			if err != nil || n < lim[0] || n > lim[1] {
				return nil, protocol.Errorf("InvalidAttributeValue", "Invalid value for the parameter %s.", k)
			}
			continue
		}
		if k == "FifoQueue" || k == "ContentBasedDeduplication" {
			return nil, protocol.Errorf("InvalidAttributeName", "FIFO queues are not simulated: %s", k)
		}
		if !otherAttrs[k] {
			return nil, protocol.Errorf("InvalidAttributeName", "Unknown Attribute %s.", k)
		}
	}
	raw, ok := attrs["RedrivePolicy"]
	if !ok || raw == "" {
		return nil, nil
	}
	rp, err := parseRedrive(raw)
	if err != nil {
		return nil, protocol.Errorf("InvalidAttributeValue", "Value %s for parameter RedrivePolicy is invalid. Reason: %v.", raw, err)
	}
	return rp, nil
}

func (q *queue) intAttr(name string, def int) int {
	if v, ok := q.attrs[name]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return def
}

// md5Attributes is SQS's MD5 of message attributes: names sorted, each as
// length-prefixed name, data type, a transport byte and length-prefixed value.
func md5Attributes(attrs map[string]MessageAttribute) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Strings(names)
	h := md5.New()
	put := func(b []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		h.Write(l[:])
		h.Write(b)
	}
	for _, n := range names {
		a := attrs[n]
		put([]byte(n))
		put([]byte(a.DataType))
		if a.BinaryValue != nil {
			h.Write([]byte{2})
			put(a.BinaryValue)
		} else {
			h.Write([]byte{1})
			put([]byte(a.StringValue))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
