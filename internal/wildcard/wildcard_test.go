package wildcard

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:us-east-1:1:instance/i-1", true},
		{"arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:us-east-1:1:volume/v-1", false},
		{"amazon-eks-node-al2023-x86_64-standard-1.3?-*", "amazon-eks-node-al2023-x86_64-standard-1.36-v20260101", true},
		{"exact", "exact", true},
		{"exact", "exactly", false},
		{"*", "", true},
		{"?", "", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{strings.Repeat("*a", 20), strings.Repeat("a", 40) + "b", false},
	} {
		if got := Match(c.p, c.s); got != c.want {
			t.Errorf("Match(%q, %q) = %v", c.p, c.s, got)
		}
	}
}
