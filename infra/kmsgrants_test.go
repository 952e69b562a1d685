package infra

import (
	"strings"
	"testing"
)

func TestSplitKeyRefs(t *testing.T) {
	k := splitKeyRefs([]string{"1234abcd-0000", "arn:aws:kms:eu-west-1:444455556666:key/abcd", "alias/ebs",
		"arn:aws:kms:eu-west-1:111122223333:alias/other", "alias/ebs", ""})
	wantARNs := "arn:${AWS::Partition}:kms:${AWS::Region}:${AWS::AccountId}:key/1234abcd-0000,arn:aws:kms:eu-west-1:444455556666:key/abcd"
	if strings.Join(k.arns, ",") != wantARNs || strings.Join(k.aliases, ",") != "alias/ebs,alias/other" {
		t.Errorf("split = %+v", k)
	}
}

// TestEBSKeyGrants: the controller may have EBS use exactly the keys the
// EC2NodeClasses name, only through EC2, grants only for AWS resources; a
// configuration naming no key gets no KMS statement.
func TestEBSKeyGrants(t *testing.T) {
	_, _, plain := full(t)
	for _, s := range statements(plain) {
		for _, a := range s.Actions {
			if strings.HasPrefix(a, "kms:") {
				t.Errorf("%s: %s granted though no EC2NodeClass names a key", s.Policy, a)
			}
		}
	}
	nc := goodNodeConfig()
	nc.NodeClasses[0].KMSKeys = []string{"1234abcd-0000", "alias/ebs"}
	s, err := newTestStack(t, baseConfig(t), (&fakeLoader{cfg: nc}).load, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var grants, uses int
	for _, st := range statements(templateJSON(t, s)) {
		if !st.has("kms:CreateGrant") && !st.has("kms:Decrypt") {
			continue
		}
		res := js(st.Resources)
		if !strings.Contains(js(st.cond("StringEquals", "kms:ViaService")), "ec2.${AWS::Region}.amazonaws.com") {
			t.Errorf("%s: %v not limited to EC2's use: %s", st.Policy, st.Actions, js(st.Condition))
		}
		aliased := strings.Contains(res, ":key/*")
		if aliased != (js(st.cond("ForAnyValue:StringEquals", "kms:ResourceAliases")) == `["alias/ebs"]`) {
			t.Errorf("%s: %v on %s: a key/* resource needs the alias condition, and only it", st.Policy, st.Actions, res)
		}
		if !aliased && !strings.Contains(res, ":key/1234abcd-0000") {
			t.Errorf("%s: %v on %s, want the class's key", st.Policy, st.Actions, res)
		}
		switch {
		case st.has("kms:CreateGrant"):
			grants++
			if len(st.Actions) != 1 || st.cond("Bool", "kms:GrantIsForAWSResource") != "true" {
				t.Errorf("%s: CreateGrant %v without kms:GrantIsForAWSResource: %s", st.Policy, st.Actions, js(st.Condition))
			}
		default:
			uses++
			if strings.Join(st.Actions, ",") != strings.Join(ebsKeyUseActions, ",") {
				t.Errorf("%s: key use %v, want %v", st.Policy, st.Actions, ebsKeyUseActions)
			}
		}
	}
	if grants != 2 || uses != 2 {
		t.Errorf("%d grant and %d use statements, want 2 of each (by ARN, by alias)", grants, uses)
	}
}
