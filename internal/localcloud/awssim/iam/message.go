package iam

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// Message is what an encoded authorization failure message holds, in the
// shape sts:DecodeAuthorizationMessage returns for AWS's: whether the
// request was allowed, the statements that decided, and the request context
// IAM evaluated.
type Message struct {
	Allowed      bool     `json:"allowed"`
	ExplicitDeny bool     `json:"explicitDeny"`
	Matched      []string `json:"matchedStatements"`
	Context      struct {
		Principal  string              `json:"principal"`
		Action     string              `json:"action"`
		Resource   string              `json:"resource"`
		Conditions map[string][]string `json:"conditions"`
	} `json:"context"`
}

// NewMessage describes a decision on a request.
func NewMessage(req Request, d Decision) Message {
	var m Message
	m.Allowed, m.ExplicitDeny = d.Effect == Allowed, d.Effect == ExplicitDeny
	for _, st := range d.Matched {
		m.Matched = append(m.Matched, st.ID)
	}
	m.Context.Principal, m.Context.Action, m.Context.Resource = req.Principal, req.Action, req.Resource
	m.Context.Conditions = map[string][]string(req.Context)
	return m
}

// Encode is the opaque text EC2 puts after "Encoded authorization failure
// message:". AWS encrypts it; the local cloud only encodes it, and decodes
// it in sts:DecodeAuthorizationMessage as AWS does.
func (m Message) Encode() string {
	b, _ := json.Marshal(m)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeMessage reverses Encode.
func DecodeMessage(s string) (Message, error) {
	var m Message
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return m, fmt.Errorf("decode authorization message: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("decode authorization message: %w", err)
	}
	return m, nil
}

// Reason is the human sentence AWS puts in an access-denied error.
func (m Message) Reason() string {
	why := "because no identity-based policy allows the " + m.Context.Action + " action"
	if m.ExplicitDeny {
		why = "with an explicit deny in an identity-based policy: " + strings.Join(m.Matched, ", ")
	}
	return fmt.Sprintf("User: %s is not authorized to perform: %s on resource: %s %s", m.Context.Principal, m.Context.Action, m.Context.Resource, why)
}

// String prints the decoded message for a test log: the reason and the
// request context's keys in order.
func (m Message) String() string {
	keys := make([]string, 0, len(m.Context.Conditions))
	for k := range m.Context.Conditions {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(m.Reason())
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %s = %s", k, strings.Join(m.Context.Conditions[k], ", "))
	}
	return b.String()
}

// JSON is the decoded form sts:DecodeAuthorizationMessage returns.
func (m Message) JSON() string {
	b, _ := json.Marshal(m)
	return string(b)
}

// ParseDecodedMessage reads what sts:DecodeAuthorizationMessage returned.
func ParseDecodedMessage(s string) (Message, error) {
	var m Message
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return m, fmt.Errorf("parse decoded authorization message: %w", err)
	}
	return m, nil
}
