package iam

import (
	"fmt"
	"strconv"
	"strings"
)

// qualifier is the set operator in front of a condition operator.
type qualifier int

const (
	single qualifier = iota
	forAll
	forAny
)

// base operators: match reports whether one request value matches one
// policy value; negated operators (StringNotEquals ...) are the positive
// one with negate set.
var operators = map[string]struct {
	match  func(value, policy string) bool
	negate bool
}{
	"StringEquals":              {func(v, p string) bool { return v == p }, false},
	"StringNotEquals":           {func(v, p string) bool { return v == p }, true},
	"StringEqualsIgnoreCase":    {strings.EqualFold, false},
	"StringNotEqualsIgnoreCase": {strings.EqualFold, true},
	"StringLike":                {func(v, p string) bool { return Glob(p, v) }, false},
	"StringNotLike":             {func(v, p string) bool { return Glob(p, v) }, true},
	"ArnEquals":                 {arnLike, false},
	"ArnLike":                   {arnLike, false},
	"ArnNotEquals":              {arnLike, true},
	"ArnNotLike":                {arnLike, true},
	"Bool":                      {strings.EqualFold, false},
	"NumericEquals":             {numeric(func(a, b float64) bool { return a == b }), false},
	"NumericNotEquals":          {numeric(func(a, b float64) bool { return a == b }), true},
	"NumericLessThan":           {numeric(func(a, b float64) bool { return a < b }), false},
	"NumericLessThanEquals":     {numeric(func(a, b float64) bool { return a <= b }), false},
	"NumericGreaterThan":        {numeric(func(a, b float64) bool { return a > b }), false},
	"NumericGreaterThanEquals":  {numeric(func(a, b float64) bool { return a >= b }), false},
	"Null":                      {nil, false}, // handled apart: it tests presence
}

// parseOperator splits "ForAllValues:StringEqualsIfExists" into its parts.
func parseOperator(op string) (q qualifier, base string, ifExists bool, negate bool, err error) {
	rest := op
	switch {
	case strings.HasPrefix(rest, "ForAllValues:"):
		q, rest = forAll, strings.TrimPrefix(rest, "ForAllValues:")
	case strings.HasPrefix(rest, "ForAnyValue:"):
		q, rest = forAny, strings.TrimPrefix(rest, "ForAnyValue:")
	}
	if strings.HasSuffix(rest, "IfExists") && rest != "Null" {
		ifExists, rest = true, strings.TrimSuffix(rest, "IfExists")
	}
	o, ok := operators[rest]
	if !ok {
		return q, rest, ifExists, false, fmt.Errorf("condition operator %q is not one the local cloud evaluates", op)
	}
	return q, rest, ifExists, o.negate, nil
}

// holds evaluates one condition against the request context, with IAM's
// rules for absent keys: a missing key fails a positive operator and
// satisfies a negated one, IfExists makes a missing key pass, ForAllValues
// passes on an empty set and ForAnyValue fails on it.
func (c Condition) holds(ctx Context) bool {
	q, base, ifExists, negate, err := parseOperator(c.Operator)
	if err != nil {
		return false // ParsePolicy refuses these; never allow on what we cannot read
	}
	values, present := ctx.Get(c.Key)
	if base == "Null" {
		want := len(c.Values) > 0 && strings.EqualFold(c.Values[0], "true")
		return want == (!present || len(values) == 0)
	}
	if !present || len(values) == 0 {
		switch {
		case q == forAll:
			return true
		case q == forAny:
			return false
		case ifExists:
			return true
		default:
			return negate
		}
	}
	ok := func(v string) bool {
		m := false
		for _, p := range c.Values {
			if operators[base].match(v, p) {
				m = true
				break
			}
		}
		return m != negate
	}
	switch q {
	case forAll:
		for _, v := range values {
			if !ok(v) {
				return false
			}
		}
		return true
	case forAny:
		for _, v := range values {
			if ok(v) {
				return true
			}
		}
		return false
	}
	// A single-valued key: negated operators need no value to match.
	if negate {
		for _, v := range values {
			if !ok(v) {
				return false
			}
		}
		return true
	}
	for _, v := range values {
		if ok(v) {
			return true
		}
	}
	return false
}

// arnLike compares ARNs component by component (the first five), each
// with wildcards, and the resource part as a whole.
func arnLike(value, pattern string) bool {
	vp, pp := strings.SplitN(value, ":", 6), strings.SplitN(pattern, ":", 6)
	if len(vp) != 6 || len(pp) != 6 {
		return Glob(pattern, value)
	}
	for i := range pp {
		if !Glob(pp[i], vp[i]) {
			return false
		}
	}
	return true
}

func numeric(cmp func(a, b float64) bool) func(v, p string) bool {
	return func(v, p string) bool {
		a, err1 := strconv.ParseFloat(v, 64)
		b, err2 := strconv.ParseFloat(p, 64)
		return err1 == nil && err2 == nil && cmp(a, b)
	}
}
