package iam

import (
	"strings"
	"testing"
)

func mustPolicy(t *testing.T, doc string) *Policy {
	t.Helper()
	p, err := ParsePolicyJSON("p", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// effectCase is a request and the effect the policies must give it.
type effectCase struct {
	r    Request
	want Effect
}

// wantEffects evaluates each case's request against policies.
func wantEffects(t *testing.T, policies []*Policy, cases []effectCase) {
	t.Helper()
	for _, c := range cases {
		if got := Evaluate(policies, c.r).Effect; got != c.want {
			t.Errorf("%s on %s: %v, want %v", c.r.Action, c.r.Resource, got, c.want)
		}
	}
}

func req(action, resource string, kv ...string) Request {
	ctx := Context{}
	for i := 0; i+1 < len(kv); i += 2 {
		vals, _ := ctx.Get(kv[i])
		ctx.Set(kv[i], append(vals, kv[i+1])...)
	}
	return Request{Principal: "arn:aws:sts::1:assumed-role/r/s", Action: action, Resource: resource, Context: ctx}
}

func TestEvaluationOrder(t *testing.T) {
	allow := mustPolicy(t, `{"Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"}]}`)
	deny := mustPolicy(t, `{"Statement":{"Effect":"Deny","Action":"ec2:TerminateInstances","Resource":"arn:aws:ec2:*:*:instance/i-1"}}`)
	cases := []struct {
		name     string
		policies []*Policy
		req      Request
		want     Effect
	}{
		{"no policy", nil, req("ec2:RunInstances", "*"), ImplicitDeny},
		{"allow", []*Policy{allow}, req("ec2:RunInstances", "*"), Allowed},
		{"action case-insensitive", []*Policy{allow}, req("EC2:runinstances", "*"), Allowed},
		{"other service", []*Policy{allow}, req("sqs:SendMessage", "*"), ImplicitDeny},
		{"explicit deny wins", []*Policy{allow, deny}, req("ec2:TerminateInstances", "arn:aws:ec2:us-east-1:1:instance/i-1"), ExplicitDeny},
		{"deny of another resource", []*Policy{allow, deny}, req("ec2:TerminateInstances", "arn:aws:ec2:us-east-1:1:instance/i-2"), Allowed},
	}
	for _, c := range cases {
		if got := Evaluate(c.policies, c.req).Effect; got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestNotActionAndNotResource(t *testing.T) {
	p := mustPolicy(t, `{"Statement":[
		{"Effect":"Allow","NotAction":"iam:*","Resource":"*"},
		{"Effect":"Deny","Action":"s3:*","NotResource":"arn:aws:s3:::mine/*"}]}`)
	wantEffects(t, []*Policy{p}, []effectCase{
		{req("iam:PassRole", "*"), ImplicitDeny},
		{req("sqs:SendMessage", "*"), Allowed},
		{req("s3:GetObject", "arn:aws:s3:::mine/a"), Allowed},
		{req("s3:GetObject", "arn:aws:s3:::theirs/a"), ExplicitDeny},
	})
}

func TestConditionOperators(t *testing.T) {
	cases := []struct {
		cond string
		kv   []string
		want bool
	}{
		{`"StringEquals":{"aws:RequestTag/team":"a"}`, []string{"aws:RequestTag/team", "a"}, true},
		{`"StringEquals":{"aws:RequestTag/team":"a"}`, []string{"aws:RequestTag/team", "A"}, false},
		{`"StringEquals":{"aws:RequestTag/team":"a"}`, nil, false},
		{`"StringEqualsIgnoreCase":{"k":"a"}`, []string{"k", "A"}, true},
		{`"StringNotEquals":{"k":"a"}`, nil, true}, // absent key satisfies a negated operator
		{`"StringNotEquals":{"k":"a"}`, []string{"k", "a"}, false},
		{`"StringLike":{"k":"pool-*"}`, []string{"k", "pool-x"}, true},
		{`"StringLike":{"k":"pool-?"}`, []string{"k", "pool-xy"}, false},
		{`"StringNotLike":{"k":"pool-*"}`, []string{"k", "other"}, true},
		{`"StringEqualsIfExists":{"k":"a"}`, nil, true},
		{`"StringEqualsIfExists":{"k":"a"}`, []string{"k", "b"}, false},
		{`"ArnLike":{"aws:SourceArn":"arn:aws:events:*:1:rule/*"}`, []string{"aws:SourceArn", "arn:aws:events:us-east-1:1:rule/x"}, true},
		{`"ArnEquals":{"aws:SourceArn":"arn:aws:events:us-east-1:1:rule/x"}`, []string{"aws:SourceArn", "arn:aws:events:us-east-1:2:rule/x"}, false},
		{`"Bool":{"aws:SecureTransport":"false"}`, []string{"aws:SecureTransport", "true"}, false},
		{`"Bool":{"aws:SecureTransport":false}`, []string{"aws:SecureTransport", "false"}, true},
		{`"Null":{"aws:RequestTag/x":"true"}`, nil, true},
		{`"Null":{"aws:RequestTag/x":"false"}`, nil, false},
		{`"NumericLessThanEquals":{"n":"10"}`, []string{"n", "10"}, true},
		{`"NumericGreaterThan":{"n":"10"}`, []string{"n", "9.5"}, false},
		{`"ForAllValues:StringEquals":{"aws:TagKeys":["a","b"]}`, []string{"aws:TagKeys", "a", "aws:TagKeys", "b"}, true},
		{`"ForAllValues:StringEquals":{"aws:TagKeys":["a","b"]}`, []string{"aws:TagKeys", "a", "aws:TagKeys", "c"}, false},
		{`"ForAllValues:StringEquals":{"aws:TagKeys":["a"]}`, nil, true}, // the documented empty-set pitfall
		{`"ForAnyValue:StringEquals":{"aws:TagKeys":["a"]}`, nil, false},
		{`"ForAnyValue:StringLike":{"aws:TagKeys":["kar*"]}`, []string{"aws:TagKeys", "x", "aws:TagKeys", "karpenter.sh/nodepool"}, true},
	}
	for _, c := range cases {
		p := mustPolicy(t, `{"Statement":[{"Effect":"Allow","Action":"a:b","Resource":"*","Condition":{`+c.cond+`}}]}`)
		got := Evaluate([]*Policy{p}, req("a:b", "*", c.kv...)).Effect == Allowed
		if got != c.want {
			t.Errorf("%s with %v: %v, want %v", c.cond, c.kv, got, c.want)
		}
	}
}

func TestParseRefusesWhatItCannotEvaluate(t *testing.T) {
	for _, doc := range []string{
		`{"Statement":[{"Effect":"Allow","Action":"a:b","Resource":"*","Condition":{"DateGreaterThan":{"aws:CurrentTime":"2020-01-01"}}}]}`,
		`{"Statement":[{"Effect":"Maybe","Action":"a:b","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Resource":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","Action":"a:b","Resource":{"Fn::GetAtt":["T","Arn"]}}]}`,
	} {
		if _, err := ParsePolicyJSON("p", []byte(doc)); err == nil {
			t.Errorf("parsed %s", doc)
		}
	}
}

func TestMessageRoundTrip(t *testing.T) {
	p := mustPolicy(t, `{"Statement":[{"Effect":"Deny","Action":"a:b","Resource":"*"}]}`)
	r := req("a:b", "arn:x", "k", "v")
	m := NewMessage(r, Evaluate([]*Policy{p}, r))
	got, err := DecodeMessage(m.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !got.ExplicitDeny || got.Context.Action != "a:b" || got.Context.Conditions["k"][0] != "v" || !strings.Contains(got.String(), "explicit deny") {
		t.Errorf("decoded %+v", got)
	}
}

// TestActionMatchingAllocatesNothing: every statement's actions are matched
// against every target of every call the local cloud authorizes (a
// CreateFleet has a target per launch template, subnet, image and type);
// lower-casing both sides per pattern made that most of the simulator's
// CPU in a provisioner's burst.
func TestActionMatchingAllocatesNothing(t *testing.T) {
	patterns := []string{"EC2:Describe*", "ec2:RunInstances", "ec2:Create*"}
	if !anyAction(patterns, "ec2:CreateFleet") || anyAction(patterns, "ec2:TerminateInstances") {
		t.Fatal("wrong match")
	}
	if n := testing.AllocsPerRun(100, func() { anyAction(patterns, "ec2:CreateFleet") }); n != 0 {
		t.Errorf("matching an action allocates %v times", n)
	}
}
