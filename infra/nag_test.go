package infra

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/aws-cdk-go/awscdk/v2/awssqs"
	"github.com/aws/jsii-runtime-go"
)

func nagErrors(t *testing.T, st awscdk.Stack) []string {
	t.Helper()
	var out []string
	check(t, "nag annotations", func() {
		found := assertions.Annotations_FromStack(st).FindError(jsii.String("*"), assertions.Match_StringLikeRegexp(jsii.String("AwsSolutions-.*")))
		for _, m := range *found {
			out = append(out, fmt.Sprintf("%s: %v", *m.Id, m.Entry.Data)) //nolint:staticcheck // SA1019: the Go bindings offer no other accessor for an assertion message's id and entry
		}
	})
	return out
}

func TestNag(t *testing.T) {
	s, _, _ := full(t)
	for _, e := range nagErrors(t, s.Stack) {
		t.Errorf("unsuppressed cdk-nag finding: %s", e)
	}
}

// The nag harness itself must be able to fail: an unencrypted queue without
// TLS enforcement is flagged.
func TestNagCatchesFindings(t *testing.T) {
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir())})
	st := awscdk.NewStack(app, jsii.String("nag-canary"), nil)
	awssqs.NewQueue(st, jsii.String("Plain"), &awssqs.QueueProps{Encryption: awssqs.QueueEncryption_UNENCRYPTED})
	ApplyNag(app)
	errs := strings.Join(nagErrors(t, st), "\n")
	if !strings.Contains(errs, "AwsSolutions-SQS4") {
		t.Errorf("cdk-nag did not flag a queue without enforceSSL; findings:\n%s", errs)
	}
}

// cdk-nag's report proves the rules ran over the stack: every finding is
// either compliant or suppressed with a reason, none is open.
func TestNagReport(t *testing.T) {
	full(t)
	b, err := os.ReadFile(filepath.Join(testRoot, "full", "out", "AwsSolutions--"+StackName(testCluster)+"-NagReport.csv"))
	if err != nil {
		t.Fatal(err)
	}
	suppressed := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		cols := strings.Split(line, "\",\"")
		if len(cols) < 4 {
			continue
		}
		rule := strings.TrimPrefix(cols[0], "\"")
		switch cols[2] {
		case "Non-Compliant":
			t.Errorf("open finding: %s", line)
		case "Suppressed":
			if len(cols[3]) < 40 {
				t.Errorf("suppression without a real reason: %s", line)
			}
			suppressed[rule] = true
		}
	}
	for _, r := range []string{"AwsSolutions-IAM4", "AwsSolutions-IAM5", "AwsSolutions-SMG4"} {
		if !suppressed[r] {
			t.Errorf("%s never evaluated (no suppressed finding): did cdk-nag run?", r)
		}
	}
}
