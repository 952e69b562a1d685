package eventsim

import (
	"encoding/json"
	"testing"
)

func TestPatternMatch(t *testing.T) {
	event := `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","resources":["arn:aws:ec2:us-west-2:1:instance/i-1","arn:x"],
		"detail":{"instance-id":"i-1","state":"stopping","n":5}}`
	var ev map[string]any
	if err := json.Unmarshal([]byte(event), &ev); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		pattern string
		want    bool
	}{
		{`{"source":["aws.ec2"]}`, true},
		{`{"source":["aws.health"]}`, false},
		{`{"source":["aws.ec2"],"detail":{"state":["stopping","stopped"]}}`, true},
		{`{"detail":{"state":[{"anything-but":["stopping"]}]}}`, false},
		{`{"detail":{"state":[{"anything-but":"running"}]}}`, true},
		{`{"detail":{"instance-id":[{"prefix":"i-"}]}}`, true},
		{`{"detail":{"instance-id":[{"suffix":"-2"}]}}`, false},
		{`{"detail":{"missing":[{"exists":false}]}}`, true},
		{`{"detail":{"state":[{"exists":false}]}}`, false},
		{`{"detail":{"n":[5]}}`, true},
		{`{"detail":{"n":["5"]}}`, false},
		{`{"resources":["arn:x"]}`, true},
		{`{"detail-type":[{"equals-ignore-case":"ec2 instance state-change notification"}]}`, true},
	}
	for _, tc := range tests {
		p, err := ParsePattern(tc.pattern)
		if err != nil {
			t.Fatalf("%s: %v", tc.pattern, err)
		}
		if got := p.Match(ev); got != tc.want {
			t.Errorf("%s: match=%v, want %v", tc.pattern, got, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `{"source":"aws.ec2"}`, `{"source":[{"wildcard":"x"}]}`} {
		if _, err := ParsePattern(bad); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
