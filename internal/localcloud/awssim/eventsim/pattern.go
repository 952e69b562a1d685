package eventsim

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Pattern is a parsed EventBridge event pattern.
type Pattern map[string]any

// ParsePattern parses and checks an event pattern: every leaf must be an
// array of values or matchers (prefix, suffix, anything-but, exists, equals-ignore-case).
func ParsePattern(s string) (Pattern, error) {
	var p Pattern
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("event pattern is not a JSON object: %w", err)
	}
	if err := checkPattern(p, ""); err != nil {
		return nil, err
	}
	return p, nil
}

func checkPattern(p map[string]any, path string) error {
	for k, v := range p {
		switch x := v.(type) {
		case map[string]any:
			if err := checkPattern(x, path+k+"."); err != nil {
				return err
			}
		case []any:
			for _, e := range x {
				if m, ok := e.(map[string]any); ok {
					for op := range m {
						switch op {
						case "prefix", "suffix", "anything-but", "exists", "equals-ignore-case":
						default:
							return fmt.Errorf("event pattern %s%s: unsupported matcher %q", path, k, op)
						}
					}
				}
			}
		default:
			return fmt.Errorf("event pattern %s%s: value must be an array or an object", path, k)
		}
	}
	return nil
}

// Match reports whether an event (the envelope as a JSON object) matches.
func (p Pattern) Match(event map[string]any) bool { return matchObj(p, event) }

func matchObj(p map[string]any, ev map[string]any) bool {
	for k, pv := range p {
		ev, present := ev[k]
		switch x := pv.(type) {
		case map[string]any:
			sub, ok := ev.(map[string]any)
			if !ok || !matchObj(x, sub) {
				return false
			}
		case []any:
			if !matchLeaf(x, ev, present) {
				return false
			}
		}
	}
	return true
}

func matchLeaf(alts []any, v any, present bool) bool {
	values := []any{v}
	if arr, ok := v.([]any); ok {
		values = arr
	}
	for _, alt := range alts {
		if m, ok := alt.(map[string]any); ok {
			if ex, ok := m["exists"]; ok {
				if b, _ := ex.(bool); b == present {
					return true
				}
				continue
			}
		}
		if !present {
			continue
		}
		for _, val := range values {
			if matchOne(alt, val) {
				return true
			}
		}
	}
	return false
}

func matchOne(alt, val any) bool {
	m, ok := alt.(map[string]any)
	if !ok {
		return equal(alt, val)
	}
	s, isStr := val.(string)
	for op, arg := range m {
		switch op {
		case "prefix":
			a, _ := arg.(string)
			return isStr && strings.HasPrefix(s, a)
		case "suffix":
			a, _ := arg.(string)
			return isStr && strings.HasSuffix(s, a)
		case "equals-ignore-case":
			a, _ := arg.(string)
			return isStr && strings.EqualFold(s, a)
		case "anything-but":
			if list, ok := arg.([]any); ok {
				for _, x := range list {
					if equal(x, val) {
						return false
					}
				}
				return true
			}
			if sub, ok := arg.(map[string]any); ok {
				return !matchOne(sub, val)
			}
			return !equal(arg, val)
		}
	}
	return false
}

func equal(a, b any) bool {
	return fmt.Sprint(a) == fmt.Sprint(b) && fmt.Sprintf("%T", a) == fmt.Sprintf("%T", b)
}
