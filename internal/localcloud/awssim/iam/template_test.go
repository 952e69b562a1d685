package iam

import (
	"os"
	"strings"
	"testing"
)

func testTemplate(t *testing.T) *Template {
	t.Helper()
	b, err := os.ReadFile("testdata/template.json")
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := ParseTemplate(b)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

func TestRolePoliciesResolveAgainstTheBinding(t *testing.T) {
	tpl := testTemplate(t)
	b := Binding{Partition: "aws", Region: "eu-west-1", Account: "111122223333", StackName: "nodewright-c1",
		Physical: map[string]string{"Table": "claims-7", "WorkQueue": "work-7", "NodeRole": "KarpenterNodeRole-c1"},
		Replace:  map[string]string{"synth": "c1"}}
	policies, err := tpl.RolePolicies("ControllerRole", b)
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != 3 {
		t.Fatalf("%d policies (inline, managed, attached), want 3", len(policies))
	}
	table := "arn:aws:dynamodb:eu-west-1:111122223333:table/claims-7"
	wantEffects(t, policies, []effectCase{
		{req("eks:DescribeCluster", "arn:aws:eks:eu-west-1:111122223333:cluster/c1"), Allowed},
		{req("eks:DescribeCluster", "arn:aws:eks:eu-west-1:111122223333:cluster/synth"), ImplicitDeny},
		{req("pricing:GetProducts", "*"), Allowed},
		{req("dynamodb:GetItem", table), Allowed},
		{req("dynamodb:GetItem", table+"/index/gsi1"), Allowed},
		{req("dynamodb:GetItem", "arn:aws:dynamodb:eu-west-1:111122223333:table/claims-8"), ImplicitDeny},
		{req("iam:PassRole", "arn:aws:iam::111122223333:role/KarpenterNodeRole-c1"), Allowed},
		{req("sqs:SendMessage", "arn:aws:sqs:eu-west-1:111122223333:work-7"), Allowed},
		{req("ec2:CreateFleet", "arn:aws:ec2:eu-west-1:111122223333:instance/*", "aws:RequestTag/kubernetes.io/cluster/c1", "owned", "aws:RequestTag/owner", table), Allowed},
		{req("ec2:CreateFleet", "arn:aws:ec2:eu-west-1:111122223333:instance/*", "aws:RequestTag/kubernetes.io/cluster/c1", "owned", "aws:RequestTag/owner", table+"x"), ImplicitDeny},
	})
}

func TestInstanceProfilesMapToTheirRoles(t *testing.T) {
	b := Binding{Partition: "aws", Account: "111122223333", Physical: map[string]string{"NodeRole": "KarpenterNodeRole-c1"}, Replace: map[string]string{"synth": "c1"}}
	got, err := testTemplate(t).InstanceProfiles(b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"arn:aws:iam::111122223333:instance-profile/nodewright-c1-node":       "arn:aws:iam::111122223333:role/KarpenterNodeRole-c1",
		"arn:aws:iam::111122223333:instance-profile/nodewright-c1-given-role": "arn:aws:iam::111122223333:role/given-role",
	}
	if len(got) != len(want) {
		t.Errorf("profiles %v, want %v", got, want)
	}
	for p, role := range want {
		if got[p] != role {
			t.Errorf("%s holds %q, want %q", p, got[p], role)
		}
	}
}

func TestAWSManagedPoliciesAreNamedNotGuessed(t *testing.T) {
	_, err := testTemplate(t).RolePolicies("OtherRole", Binding{Partition: "aws"})
	if err == nil || !strings.Contains(err.Error(), "AmazonEKSWorkerNodePolicy") {
		t.Fatalf("err = %v, want one naming the AWS managed policy", err)
	}
}

func TestRolesAndConstructIDs(t *testing.T) {
	if got := strings.Join(testTemplate(t).Roles(), ","); got != "ControllerRole,NodeRole,OtherRole" {
		t.Errorf("roles %s", got)
	}
	if ConstructID("TableCD117FA1") != "Table" || ConstructID("Short") != "Short" {
		t.Error("ConstructID")
	}
}
