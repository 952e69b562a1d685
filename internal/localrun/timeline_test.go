package localrun

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestLogTapRendersHandlerRecords(t *testing.T) {
	var out, raw bytes.Buffer
	tl := NewTimeline(&out, time.Now())
	tap := &logTap{fn: "provisioner", tl: tl, raw: &raw}
	lines := []string{
		`{"level":"INFO","msg":"nodeclaim planned","nodeclaim":"default-abc","instance-type":"m6g.xlarge","zone":"us-east-1a","capacity-type":"spot","price":0.0412,"pods":3,"options":9}`,
		`{"level":"INFO","msg":"provisioner run","run":2,"trigger":"schedule","pending":0,"created":0,"resumed":0}`,
		`{"level":"INFO","msg":"something routine"}`,
		`{"level":"ERROR","msg":"launching nodeclaim failed; the next run retries it","nodeclaim":"default-abc","error":"boom"}`,
		`{"_aws":{"CloudWatchMetrics":[]}}`,
		`not json`,
	}
	// Split mid-line: the tap must reassemble records.
	all := strings.Join(lines, "\n") + "\n"
	if _, err := tap.Write([]byte(all[:50])); err != nil {
		t.Fatal(err)
	}
	if _, err := tap.Write([]byte(all[50:])); err != nil {
		t.Fatal(err)
	}
	if raw.String() != all {
		t.Errorf("raw log not forwarded verbatim")
	}
	got := out.String()
	if !strings.Contains(got, "NodeClaim default-abc planned: m6g.xlarge us-east-1a spot $0.0412/h for 3 pods (9 instance types allowed)") {
		t.Errorf("planned line missing:\n%s", got)
	}
	if !strings.Contains(got, "ERROR launching nodeclaim failed; the next run retries it: boom (nodeclaim default-abc)") {
		t.Errorf("error line missing:\n%s", got)
	}
	if strings.Contains(got, "routine") || strings.Contains(got, "run 2") || strings.Count(got, "\n") != 2 {
		t.Errorf("unexpected lines:\n%s", got)
	}
}
