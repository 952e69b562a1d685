package iam

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
)

// Policy is one identity policy document: its statements and where it came
// from (for denials and the coverage report).
type Policy struct {
	// Name says where the policy came from, e.g. the template's logical ID
	// of an AWS::IAM::Policy.
	Name       string
	Statements []Statement
}

// Statement is one statement of a policy document.
type Statement struct {
	// ID names the statement in reports: the policy's name, the index and
	// the Sid when there is one ("ControllerRoleDefaultPolicy#3 TagOnLaunch").
	ID          string
	Sid         string
	Allow       bool // Effect: Allow (true) or Deny (false)
	Action      []string
	NotAction   []string
	Resource    []string
	NotResource []string
	Conditions  []Condition
}

// Condition is one key under one operator of a Condition block.
type Condition struct {
	Operator string // as written, e.g. "ForAllValues:StringEquals"
	Key      string
	Values   []string
}

// ParsePolicy reads a policy document decoded from JSON (maps, slices,
// strings, numbers, booleans): the form a template holds after its
// intrinsic functions are resolved.
func ParsePolicy(name string, doc any) (*Policy, error) {
	m, ok := doc.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("policy %s: document is %T, not an object", name, doc)
	}
	raw := m["Statement"]
	if one, ok := raw.(map[string]any); ok {
		raw = []any{one}
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("policy %s: Statement is %T, not a list", name, raw)
	}
	p := &Policy{Name: name}
	for i, s := range list {
		st, err := parseStatement(s)
		if err != nil {
			return nil, fmt.Errorf("policy %s: statement %d: %w", name, i, err)
		}
		st.ID = fmt.Sprintf("%s#%d", name, i)
		if st.Sid != "" {
			st.ID += " " + st.Sid
		}
		p.Statements = append(p.Statements, st)
	}
	return p, nil
}

// ParsePolicyJSON is ParsePolicy on a JSON text.
func ParsePolicyJSON(name string, text []byte) (*Policy, error) {
	var doc any
	if err := json.Unmarshal(text, &doc); err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return ParsePolicy(name, doc)
}

func parseStatement(v any) (Statement, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return Statement{}, fmt.Errorf("is %T, not an object", v)
	}
	var st Statement
	st.Sid, _ = m["Sid"].(string)
	switch m["Effect"] {
	case "Allow":
		st.Allow = true
	case "Deny":
	default:
		return st, fmt.Errorf("Effect %v is neither Allow nor Deny", m["Effect"])
	}
	var err error
	for key, dst := range map[string]*[]string{"Action": &st.Action, "NotAction": &st.NotAction, "Resource": &st.Resource, "NotResource": &st.NotResource} {
		if raw, ok := m[key]; ok {
			if *dst, err = strings1(raw); err != nil {
				return st, fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if (len(st.Action) == 0) == (len(st.NotAction) == 0) {
		return st, fmt.Errorf("needs exactly one of Action and NotAction")
	}
	if (len(st.Resource) == 0) == (len(st.NotResource) == 0) {
		return st, fmt.Errorf("needs exactly one of Resource and NotResource")
	}
	if raw, ok := m["Condition"]; ok {
		if st.Conditions, err = parseConditions(raw); err != nil {
			return st, err
		}
	}
	return st, nil
}

func parseConditions(raw any) ([]Condition, error) {
	block, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("Condition is %T, not an object", raw)
	}
	var out []Condition
	for op, keys := range block {
		if _, _, _, _, err := parseOperator(op); err != nil {
			return nil, err
		}
		km, ok := keys.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("Condition %s is %T, not an object", op, keys)
		}
		for key, vals := range km {
			vs, err := strings1(vals)
			if err != nil {
				return nil, fmt.Errorf("Condition %s %s: %w", op, key, err)
			}
			out = append(out, Condition{Operator: op, Key: key, Values: vs})
		}
	}
	// Maps have no order; reports and tests want one.
	sort.Slice(out, func(i, j int) bool {
		if out[i].Operator != out[j].Operator {
			return out[i].Operator < out[j].Operator
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

// strings1 reads a string-or-list value; IAM also accepts numbers and
// booleans as condition values, compared as text.
func strings1(v any) ([]string, error) {
	switch x := v.(type) {
	case string:
		return []string{x}, nil
	case bool:
		return []string{strconv.FormatBool(x)}, nil
	case float64:
		return []string{strconv.FormatFloat(x, 'f', -1, 64)}, nil
	case json.Number:
		return []string{x.String()}, nil
	case []any:
		out := make([]string, 0, len(x))
		for _, e := range x {
			s, err := strings1(e)
			if err != nil {
				return nil, err
			}
			out = append(out, s...)
		}
		return out, nil
	case []string:
		return x, nil
	}
	return nil, fmt.Errorf("value %v (%T) is not a string, number, boolean or list (an unresolved intrinsic?)", v, v)
}
