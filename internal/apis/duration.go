package apis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"time"
)

// Never is the literal that disables expiration or consolidation.
const Never = "Never"

// NillableDuration is a duration that may also be "Never" (expireAfter,
// consolidateAfter). The zero value means "not set" so defaulting can tell an
// omitted field from an explicit "Never".
type NillableDuration struct {
	// Duration is the value when set to a duration; nil otherwise.
	Duration *time.Duration
	// Never is true when the field is the literal "Never".
	Never bool
}

// DurationOf returns a NillableDuration holding d.
func DurationOf(d time.Duration) NillableDuration { return NillableDuration{Duration: &d} }

// NeverDuration returns the "Never" value.
func NeverDuration() NillableDuration { return NillableDuration{Never: true} }

// IsZero reports whether the field was left unset (used by omitzero).
func (n NillableDuration) IsZero() bool { return n.Duration == nil && !n.Never }

// Get returns the duration and whether one is set (false for "Never" or unset).
func (n NillableDuration) Get() (time.Duration, bool) {
	if n.Duration == nil {
		return 0, false
	}
	return *n.Duration, true
}

// String renders the value as Karpenter writes it ("720h0m0s", "Never", "").
func (n NillableDuration) String() string {
	switch {
	case n.Never:
		return Never
	case n.Duration != nil:
		return n.Duration.String()
	}
	return ""
}

// nillableDurationPattern is the CRD pattern of expireAfter/consolidateAfter.
var nillableDurationPattern = regexp.MustCompile(`^(([0-9]+(s|m|h))+|Never)$`)

// ParseNillableDuration parses "Never" or a Karpenter duration ("30s", "1h30m").
func ParseNillableDuration(s string) (NillableDuration, error) {
	if s == Never {
		return NeverDuration(), nil
	}
	if !nillableDurationPattern.MatchString(s) {
		return NillableDuration{}, fmt.Errorf("%q is not a duration (e.g. 30s, 5m, 720h) or %q", s, Never)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return NillableDuration{}, fmt.Errorf("%q is not a duration: %w", s, err)
	}
	return DurationOf(d), nil
}

// MarshalJSON writes "Never", the duration string, or null when unset.
func (n NillableDuration) MarshalJSON() ([]byte, error) {
	if n.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(n.String())
}

// UnmarshalJSON accepts "Never", a duration string, or null (unset).
func (n *NillableDuration) UnmarshalJSON(b []byte) error {
	if bytes.Equal(bytes.TrimSpace(b), []byte("null")) {
		*n = NillableDuration{}
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("expected a duration string or %q", Never)
	}
	v, err := ParseNillableDuration(s)
	if err != nil {
		return err
	}
	*n = v
	return nil
}
