package localrun

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
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

// The function stand-in decodes like the Lambda runtime (the handler gets
// the event's JSON) and serializes a singleton's invocations.
func TestFunctionInvoke(t *testing.T) {
	var got []json.RawMessage
	running := 0
	f := &function{name: "x", timeout: time.Second, singleton: true, handle: func(ctx context.Context, raw json.RawMessage) (any, error) {
		running++
		defer func() { running-- }()
		if running > 1 {
			t.Error("singleton invoked concurrently")
		}
		if _, ok := ctx.Deadline(); !ok {
			t.Error("no invocation deadline")
		}
		got = append(got, raw)
		return events.SQSEventResponse{}, nil
	}}
	ev := scheduledEvent("us-east-1", "123456789012", "r", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if _, err := f.invoke(context.Background(), "schedule", ev); err != nil {
		t.Fatal(err)
	}
	var probe struct {
		DetailType string   `json:"detail-type"`
		Source     string   `json:"source"`
		Time       string   `json:"time"`
		Resources  []string `json:"resources"`
	}
	if err := json.Unmarshal(got[0], &probe); err != nil {
		t.Fatal(err)
	}
	if probe.DetailType != "Scheduled Event" || probe.Source != "aws.events" || probe.Time != "2026-01-02T03:04:05Z" ||
		len(probe.Resources) != 1 || probe.Resources[0] != "arn:aws:events:us-east-1:123456789012:rule/r" {
		t.Fatalf("scheduled event %s", got[0])
	}
}

// The webhook endpoint serves TLS that verifies against the CA put in the
// configuration's caBundle, for 127.0.0.1, and passes requests through.
func TestWebhookServerTLS(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/s3cret") {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	ws, err := startWebhook(h, "s3cret", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ws.caPEM) {
		t.Fatal("caBundle is not PEM")
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	resp, err := client.Post(ws.url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatalf("TLS with the generated CA: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("status %d body %q", resp.StatusCode, body)
	}
	n, first, last := ws.stats(time.Now())
	if n != 1 || first.IsZero() || last != first {
		t.Fatalf("stats %d %v %v", n, first, last)
	}
}
