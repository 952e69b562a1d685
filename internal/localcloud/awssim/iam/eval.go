package iam

import (
	"strings"

	"github.com/nodewright/nodewright/internal/wildcard"
)

// Request is one authorization: an action on one resource, with the
// request context's condition keys. A call that touches several resources
// (CreateFleet: the fleet, each instance, volume, template, subnet ...) is
// several Requests, one per resource, as AWS authorizes it.
type Request struct {
	Principal string // the caller's ARN, for messages
	Action    string // "ec2:CreateFleet"
	Resource  string // an ARN, or "*" for actions without resource-level permissions
	Context   Context
}

// Context holds the condition keys of a request. Key names are
// case-insensitive in IAM; Set and Get fold them.
type Context map[string][]string

// Set stores the values of a key.
func (c Context) Set(key string, values ...string) { c[strings.ToLower(key)] = values }

// Get returns the values of a key and whether it is present.
func (c Context) Get(key string) ([]string, bool) {
	v, ok := c[strings.ToLower(key)]
	return v, ok
}

// Clone copies the context, so per-resource keys can be added to a
// request-wide base.
func (c Context) Clone() Context {
	out := make(Context, len(c))
	for k, v := range c {
		out[k] = v
	}
	return out
}

// Effect is the outcome of an evaluation.
type Effect int

const (
	// ImplicitDeny: no statement allows the request.
	ImplicitDeny Effect = iota
	// Allowed: a statement allows it and none denies it.
	Allowed
	// ExplicitDeny: a Deny statement matches; it wins over every Allow.
	ExplicitDeny
)

func (e Effect) String() string {
	switch e {
	case Allowed:
		return "allowed"
	case ExplicitDeny:
		return "explicit deny"
	}
	return "implicit deny"
}

// Decision is the evaluation of one Request.
type Decision struct {
	Effect Effect
	// Matched lists the statements that decided: the Allow statements that
	// match (all of them, for the coverage report), or the Deny that won.
	Matched []*Statement
}

// Evaluate applies IAM's identity-policy logic: an explicit Deny in any
// policy wins, otherwise any matching Allow allows, otherwise the request
// is implicitly denied.
func Evaluate(policies []*Policy, req Request) Decision {
	var allows []*Statement
	for _, p := range policies {
		for i := range p.Statements {
			st := &p.Statements[i]
			if !st.Matches(req) {
				continue
			}
			if !st.Allow {
				return Decision{Effect: ExplicitDeny, Matched: []*Statement{st}}
			}
			allows = append(allows, st)
		}
	}
	if len(allows) > 0 {
		return Decision{Effect: Allowed, Matched: allows}
	}
	return Decision{Effect: ImplicitDeny}
}

// Matches reports whether the statement applies to the request: its action,
// resource and every condition match.
func (st *Statement) Matches(req Request) bool {
	if len(st.Action) > 0 && !anyAction(st.Action, req.Action) {
		return false
	}
	if len(st.NotAction) > 0 && anyAction(st.NotAction, req.Action) {
		return false
	}
	if len(st.Resource) > 0 && !anyGlob(st.Resource, req.Resource, false) {
		return false
	}
	if len(st.NotResource) > 0 && anyGlob(st.NotResource, req.Resource, false) {
		return false
	}
	for _, c := range st.Conditions {
		if !c.holds(req.Context) {
			return false
		}
	}
	return true
}

// anyAction matches action names: the service prefix and the action are
// case-insensitive, with * and ? wildcards.
func anyAction(patterns []string, action string) bool {
	return anyGlob(patterns, action, true)
}

func anyGlob(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if fold {
			if wildcard.MatchFold(p, s) {
				return true
			}
		} else if Glob(p, s) {
			return true
		}
	}
	return false
}

// Glob matches s against a pattern in which * matches any run of
// characters (including none, and across ':' and '/') and ? exactly one,
// as IAM's Resource elements and StringLike do.
func Glob(pattern, s string) bool { return wildcard.Match(pattern, s) }
