package aws

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// What nodewright sends stays inside EC2's limits (limits.go), and the
// count of its own tags validation relies on (apis.LaunchTags) is the
// count it adds.

// TestClientTokenFitsEC2: EC2 takes client tokens of up to 64 ASCII
// characters ("Ensuring idempotency"), whatever the cluster's (EKS: up to
// 100 characters) and the claim's (up to 253) names; the same inputs give
// the same token, and the token of a known claim is pinned (crash safety
// relies on it not changing across versions).
func TestClientTokenFitsEC2(t *testing.T) {
	cluster, claimName := strings.Repeat("c", 100), strings.Repeat("n", 253)
	tok := ClientToken(cluster, claimName, 7)
	if len(tok) > 64 {
		t.Errorf("token of %d characters: %s", len(tok), tok)
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] > 0x7e || tok[i] < 0x21 {
			t.Fatalf("token %q is not printable ASCII", tok)
		}
	}
	if tok != ClientToken(cluster, claimName, 7) || tok == ClientToken(cluster, claimName, 8) ||
		tok == ClientToken(cluster, claimName[:252]+"m", 7) || tok == ClientToken(cluster[:99]+"d", claimName, 7) {
		t.Errorf("token not deterministic per (cluster, claim, attempt): %s", tok)
	}
	if got := ClientToken("demo", "default-abc12", 0); got != "nw-63f7bde0cc8cd541ef9160350a6996f0" {
		t.Errorf("the token of a known claim changed: %s", got)
	}
}

// TestLaunchTagsCount: validation counts apis.LaunchTagCount tags on each
// instance and volume; Provider.Tags must add exactly that many, and the
// template and interface tags no more.
func TestLaunchTagsCount(t *testing.T) {
	if TagName != apis.LaunchTagName {
		t.Errorf("TagName %q, apis.LaunchTagName %q", TagName, apis.LaunchTagName)
	}
	for name, specTags := range map[string]map[string]string{
		"none": nil, "team": {"team": "payments"}, "with Name": {"team": "payments", TagName: "mine"},
	} {
		s := newShapeLaunch(t, claim(), apis.AMIFamilyAL2023)
		s.l.nc.Spec.Tags = specTags
		want := apis.LaunchTagCount(specTags)
		if got := len(s.p.Tags(s.l.claim, s.l.nc)); got != want {
			t.Errorf("%s: Provider.Tags gives %d tags, apis.LaunchTagCount %d", name, got, want)
		}
		if got := len(s.p.PoolTags(s.l.claim.NodePoolName(), s.l.nc)); got > want {
			t.Errorf("%s: PoolTags gives %d tags, more than %d", name, got, want)
		}
		spec := templateSpec{Cluster: "demo", Owner: "owner", NodeClass: s.l.nc.Name, ClassTags: specTags, NodePool: "default"}
		if got := len(spec.tags()); got > want {
			t.Errorf("%s: the template carries %d tags, more than %d", name, got, want)
		}
	}
}

// TestLaunchChecksUserDataBeforeCreateLaunchTemplate: user data within 16
// KB on its own (validation passes it) but over once nodewright's
// bootstrap wraps it is refused before any CreateLaunchTemplate, with an
// error that says so; user data that fits is sent.
func TestLaunchChecksUserDataBeforeCreateLaunchTemplate(t *testing.T) {
	opts := []option{opt(m5Large, "ami-1", catalog.Offering{Zone: "us-west-2a", CapacityType: "on-demand", Price: 0.096})}
	s := newShapeLaunch(t, claim(), apis.AMIFamilyAL2023)
	big := "#!/bin/bash\n" + strings.Repeat("#", apis.MaxUserDataBytes-20)
	s.l.nc.Spec.UserData = &big
	if errs := s.l.nc.Validate(); errs != nil && strings.Contains(errs.Error(), "spec.userData") {
		t.Fatalf("validation refuses the user data: %v", errs)
	}
	_, _, err := s.p.fleetInput(context.Background(), s.l, zonalAB, catalog.CapacityTypeOnDemand, opts, 0)
	if !errors.Is(err, ErrNodeClassNotReady) || !strings.Contains(err.Error(), "more than EC2's limit of 16384 before base64") {
		t.Errorf("oversized user data: %v, want ErrNodeClassNotReady saying the limit", err)
	}
	if len(s.rec.created) != 0 {
		t.Errorf("%d CreateLaunchTemplate calls with user data EC2 refuses", len(s.rec.created))
	}

	// 12 KB of custom user data (16 KB in base64) fits with the bootstrap.
	s = newShapeLaunch(t, claim(), apis.AMIFamilyAL2023)
	fits := "#!/bin/bash\n" + strings.Repeat("#", 12*1024)
	s.l.nc.Spec.UserData = &fits
	s.fleet(t, catalog.CapacityTypeOnDemand, opts)
	if len(s.rec.created) != 1 {
		t.Errorf("%d CreateLaunchTemplate calls for user data that fits", len(s.rec.created))
	}
	if err := checkUserDataSize("default", base64UserData(strings.Repeat("#", apis.MaxUserDataBytes))); err != nil {
		t.Errorf("16384 raw bytes (21848 in base64): %v", err)
	}
}

// TestLaunchChecksTags: a class whose tags EC2 would refuse (one that
// skipped validation) launches nothing: no template, no fleet.
func TestLaunchChecksTags(t *testing.T) {
	opts := []option{opt(m5Large, "ami-1", catalog.Offering{Zone: "us-west-2a", CapacityType: "on-demand", Price: 0.096})}
	many := map[string]string{}
	for i := range apis.MaxTagsPerResource - apis.LaunchTags + 1 {
		many["k"+strings.Repeat("x", i)] = "v"
	}
	for name, tc := range map[string]struct {
		tags map[string]string
		want string
	}{
		"too many":   {many, "each instance and volume would carry 51 tags, more than EC2's 50"},
		"aws: key":   {map[string]string{"AWS:team": "x"}, `tag "AWS:team": tag keys starting with 'aws:' are reserved for AWS`},
		"long value": {map[string]string{"team": strings.Repeat("v", 257)}, "tag value is longer than 256 characters"},
	} {
		s := newShapeLaunch(t, claim(), apis.AMIFamilyAL2023)
		s.l.nc.Spec.Tags = tc.tags
		_, _, err := s.p.fleetInput(context.Background(), s.l, zonalAB, catalog.CapacityTypeOnDemand, opts, 0)
		if !errors.Is(err, ErrNodeClassNotReady) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrNodeClassNotReady with %q", name, err, tc.want)
		}
		if len(s.rec.created) != 0 {
			t.Errorf("%s: %d launch templates created", name, len(s.rec.created))
		}
	}
}
