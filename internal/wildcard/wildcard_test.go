package wildcard

import (
	"strings"
	"testing"
)

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		p, s       string
		want, fold bool // fold: MatchFold, not Match
	}{
		{"arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:us-east-1:1:instance/i-1", true, false},
		{"arn:aws:ec2:*:*:instance/*", "arn:aws:ec2:us-east-1:1:volume/v-1", false, false},
		{"amazon-eks-node-al2023-x86_64-standard-1.3?-*", "amazon-eks-node-al2023-x86_64-standard-1.36-v20260101", true, false},
		{"exact", "exact", true, false},
		{"exact", "exactly", false, false},
		{"*", "", true, false},
		{"?", "", false, false},
		{"a*b*c", "aXbYc", true, false},
		{"a*b*c", "aXbY", false, false},
		{strings.Repeat("*a", 20), strings.Repeat("a", 40) + "b", false, false},
		{"arn:aws:ec2:*:*:Instance/*", "arn:aws:ec2:r:1:instance/i-1", false, false}, // Match keeps case
		{"EC2:Create*", "ec2:CreateFleet", true, true},
		{"ec2:Describe?nstances", "EC2:describeINSTANCES", true, true},
		{"ec2:Create*", "ec2:DeleteFleet", false, true},
		{"a[b", "A{B", false, true}, // '[' and '{' are 'A'-'a' apart but no letters
	} {
		match := Match
		if c.fold {
			match = MatchFold
		}
		if got := match(c.p, c.s); got != c.want {
			t.Errorf("Match(%q, %q) fold=%v: %v", c.p, c.s, c.fold, got)
		}
	}
	matched := false
	if n := testing.AllocsPerRun(100, func() { matched = MatchFold("EC2:Create*", "ec2:CreateFleet") }); n != 0 || !matched {
		t.Errorf("MatchFold allocates %v times a call (matched: %v)", n, matched)
	}
}
