// Package eventsim is a simulated EventBridge default bus: rules with event
// patterns whose targets (SQS queue ARNs) receive matching events as the
// EventBridge envelope JSON.
package eventsim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Config configures a bus.
type Config struct {
	Region, Account string
	Now             func() time.Time
	Seed            uint64
	// Deliver sends an event body to a target ARN.
	Deliver func(targetARN, body string) error
}

// Rule is an event rule with its targets.
type Rule struct {
	Name, EventPattern, State, Description string
	Targets                                []Target
	pattern                                Pattern
}

// Target is a rule target; only SQS queue ARNs are delivered to.
type Target struct {
	Id, Arn string
}

// Event is one event as put on the bus.
type Event struct {
	Source, DetailType, Detail string
	Resources                  []string
	Time                       time.Time
}

// Bus is the default event bus. Safe for concurrent use.
type Bus struct {
	cfg   Config
	mu    sync.Mutex
	rng   *rand.Rand
	rules map[string]*Rule
	// Published records every event put on the bus (matched or not), for tests.
	published []map[string]any
}

// New creates an empty bus.
func New(cfg Config) *Bus {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Bus{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 11)), rules: map[string]*Rule{}}
}

// PutRule creates or replaces a rule.
func (b *Bus) PutRule(name, pattern string) (string, error) {
	p, err := ParsePattern(pattern)
	if err != nil {
		return "", protocol.Errorf("InvalidEventPatternException", "Event pattern is not valid. Reason: %v", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rules[name]
	if r == nil {
		r = &Rule{Name: name, State: "ENABLED"}
		b.rules[name] = r
	}
	r.EventPattern, r.pattern = pattern, p
	return b.ruleARN(name), nil
}

func (b *Bus) ruleARN(name string) string {
	return fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", b.cfg.Region, b.cfg.Account, name)
}

// PutTargets adds or replaces targets of a rule.
func (b *Bus) PutTargets(rule string, targets ...Target) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rules[rule]
	if r == nil {
		return &protocol.APIError{Code: "ResourceNotFoundException", Message: fmt.Sprintf("Rule %s does not exist on EventBus default.", rule), Status: 400}
	}
	for _, t := range targets {
		replaced := false
		for i := range r.Targets {
			if r.Targets[i].Id == t.Id {
				r.Targets[i], replaced = t, true
			}
		}
		if !replaced {
			r.Targets = append(r.Targets, t)
		}
	}
	return nil
}

// Publish puts one event on the bus and delivers it to every matching rule's targets.
func (b *Bus) Publish(e Event) (string, error) {
	var detail map[string]any
	if err := json.Unmarshal([]byte(e.Detail), &detail); err != nil || detail == nil {
		return "", fmt.Errorf("detail is not a JSON object")
	}
	if e.Time.IsZero() {
		e.Time = b.cfg.Now()
	}
	b.mu.Lock()
	id := b.uuid()
	env := map[string]any{
		"version": "0", "id": id, "detail-type": e.DetailType, "source": e.Source, "account": b.cfg.Account,
		"time": e.Time.UTC().Format("2006-01-02T15:04:05Z"), "region": b.cfg.Region, "resources": toAny(e.Resources), "detail": detail,
	}
	b.published = append(b.published, env)
	var arns []string
	names := make([]string, 0, len(b.rules))
	for n := range b.rules {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		r := b.rules[n]
		if r.State == "ENABLED" && r.pattern.Match(env) {
			for _, t := range r.Targets {
				arns = append(arns, t.Arn)
			}
		}
	}
	b.mu.Unlock()
	body, _ := json.Marshal(env)
	for _, arn := range arns {
		if b.cfg.Deliver != nil {
			if err := b.cfg.Deliver(arn, string(body)); err != nil {
				return id, fmt.Errorf("deliver event %s to %s: %w", id, arn, err)
			}
		}
	}
	return id, nil
}

// Published returns every event envelope put on the bus so far.
func (b *Bus) Published() []map[string]any {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]map[string]any(nil), b.published...)
}

func toAny(ss []string) []any {
	out := make([]any, 0, len(ss))
	for _, s := range ss {
		out = append(out, s)
	}
	return out
}

func (b *Bus) uuid() string {
	x, y := b.rng.Uint64(), b.rng.Uint64()
	return fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", uint32(x>>32), uint16(x>>16), uint16(x)&0xfff, uint16(y>>48)&0xfff, y&0xffffffffffff)
}
