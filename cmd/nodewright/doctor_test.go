package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/doctor"
	"github.com/nodewright/nodewright/internal/doctor/doctortest"
)

// doctor's command line: the flags it needs, the text and JSON reports and
// the exit code on a failed check, against the local cloud (the SDK's
// default configuration pointed at it, as a user's environment would be).
func TestDoctorCommand(t *testing.T) {
	e := doctortest.New(t)
	if _, stderr, code := cli(t, "doctor", "--config", e.ConfigDir); code != exitUsage || !strings.Contains(stderr, "--cluster is required") {
		t.Fatalf("doctor without --cluster: exit %d, %s", code, stderr)
	}
	if _, _, code := cli(t, "doctor", "--cluster", e.Cluster, "--config", e.ConfigDir, "-o", "yaml"); code != exitUsage {
		t.Fatalf("doctor -o yaml: exit %d, want %d", code, exitUsage)
	}
	stdout, stderr, code := cli(t, "doctor", "--cluster", e.Cluster, "--config", e.ConfigDir)
	if code != exitOK || !strings.Contains(stdout, "WARN  stack") || !strings.Contains(stdout, "0 failed") {
		t.Fatalf("doctor before deploy: exit %d\n%s%s", code, stdout, stderr)
	}
	e.Deploy(t)
	e.Cloud.AWS.SetServiceLinkedRole(doctor.SpotServiceLinkedRole, false)
	stdout, stderr, code = cli(t, "doctor", "--cluster", e.Cluster, "--region", e.Region, "--config", e.ConfigDir)
	if code != exitFailure || !strings.Contains(stdout, "FAIL  spot-service-linked-role") ||
		!strings.Contains(stdout, "fix: aws iam create-service-linked-role --aws-service-name spot.amazonaws.com") || !strings.Contains(stderr, "1 check(s) failed") {
		t.Fatalf("doctor without the spot role: exit %d\n%s%s", code, stdout, stderr)
	}
	e.Cloud.AWS.SetServiceLinkedRole(doctor.SpotServiceLinkedRole, true)
	stdout, stderr, code = cli(t, "doctor", "--cluster", e.Cluster, "--config", e.ConfigDir, "-o", "json")
	var rep doctor.Report
	if code != exitOK || json.Unmarshal([]byte(stdout), &rep) != nil || !rep.Deployed || rep.Failed() {
		t.Fatalf("doctor -o json after deploy: exit %d\n%s%s", code, stdout, stderr)
	}
	if c, ok := rep.Find("iam/controller"); !ok || c.Status != doctor.Pass {
		t.Fatalf("iam/controller: %+v", c)
	}
}
