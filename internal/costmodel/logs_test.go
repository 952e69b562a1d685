package costmodel

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/admission"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/settings"
)

// webhookSecret is the shared secret of the measured webhook (in AWS it sits
// in the function URL's path, so it must never reach a log line).
const webhookSecret = "wh5ecret0b7c4e1f9a2d6e8b3c5f7a9d1e3b5c7f9a1d3e5b7"

// sqsNudger sends the webhook's nudges to the run's work queue through the
// simulator's SQS (a real SendMessage per nudge, as in AWS).
type sqsNudger struct{ e *env }

func (n sqsNudger) Nudge(ctx context.Context, hint admission.Hint, delay time.Duration) error {
	cfg, err := settings.AWSConfig(ctx)
	if err != nil {
		return err
	}
	return queue.New(sqs.NewFromConfig(cfg), n.e.workURL).Send(ctx,
		queue.Message{Kind: queue.KindProvision, Subject: hint.Namespace + "/" + hint.Name, Reason: hint.Reason}, delay)
}

// admissionReview is the repository's sample AdmissionReview (a pods/status
// UPDATE with PodScheduled=False/Unschedulable) renamed to ns/name.
func admissionReview(ns, name string) json.RawMessage {
	raw, err := os.ReadFile(filepath.Join("..", "..", "events", "admission-review-pods-status-unschedulable.json"))
	if err != nil {
		panic(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		panic(err)
	}
	req := doc["request"].(map[string]any)
	req["name"], req["namespace"] = name, ns
	req["uid"] = fmt.Sprintf("uid-%s-%s", ns, name)
	meta := req["object"].(map[string]any)["metadata"].(map[string]any)
	meta["name"], meta["namespace"] = name, ns
	out, _ := json.Marshal(doc)
	return out
}

// secretMarkers are strings no log line may contain: the webhook secret
// (and a wrong guess at it), EKS bearer tokens, the AWS secret key and the
// parts of a SigV4 signature.
func secretMarkers() map[string]string {
	return map[string]string{
		"webhook secret":          webhookSecret,
		"guessed webhook secret":  "guess" + webhookSecret[5:],
		"EKS token":               "k8s-aws-v1.",
		"AWS secret access key":   localcloud.SecretAccessKey,
		"presigned URL signature": "X-Amz-Signature",
		"authorization header":    "AWS4-HMAC-SHA256 Credential",
		"bearer token":            "Bearer ",
	}
}

// idKeys are the attributes a person searches logs by; a line about several
// subjects lists them under the plural (a Logs Insights `like` on the ID
// still finds it).
var (
	idKeys     = []string{"nodeclaim", "node", "instance-id", "nodepool", "pod"}
	pluralKeys = []string{"nodeclaims", "nodes", "instances", "pods"}
)

// TestLogsAreSafeAndSearchable drives the real handlers — the provisioner,
// lifecycle, disruption and interruption functions built through
// internal/app (reaching the cluster with an STS-presigned EKS token, as in
// Lambda) and the admission webhook with a secret — through launch,
// registration, scale-down, drain and termination at debug level, then
// checks every log line: JSON, free of secrets and tokens, and decision
// lines carry the IDs.
func TestLogsAreSafeAndSearchable(t *testing.T) {
	_, e := measure(t, 3, slog.LevelDebug)
	// The webhook's rejections: a wrong secret in the path and in the
	// header, and the right one with a malformed body.
	h, err := admission.NewHandler(admission.Options{Secret: webhookSecret, Nudger: sqsNudger{e}, Logger: slog.New(slog.NewJSONHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	guess := secretMarkers()["guessed webhook secret"]
	for _, req := range []admission.Request{
		{Method: "POST", Path: "/validate/" + guess, Body: admissionReview(e.ns, "x")},
		{Method: "POST", Path: "/validate", Headers: map[string]string{strings.ToLower(admission.SecretHeader): guess}, Body: admissionReview(e.ns, "x")},
		{Method: "POST", Path: "/validate/" + webhookSecret, Body: []byte(`{"kind":"AdmissionReview","request":` + webhookSecret)},
	} {
		if resp := h.Serve(e.ctx, req); resp.Status == 200 {
			t.Errorf("webhook accepted %s", req.Path)
		}
	}

	problems, seen := auditLogs(e.logs.Bytes())
	for _, p := range problems {
		t.Error(p)
	}
	for _, k := range idKeys {
		if seen[k] == 0 {
			t.Errorf("no log line carries %q", k)
		}
	}
	if n := strings.Count(string(e.logs.Bytes()), "\n"); n < 50 {
		t.Errorf("only %d log lines", n)
	}
}

// auditLogs checks JSON log lines: each parses, none contains a secret
// marker, and every decision line carries an ID. It returns the problems
// and how many lines carried each ID key.
func auditLogs(logs []byte) (problems []string, seen map[string]int) {
	seen = map[string]int{}
	for i, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		for what, s := range secretMarkers() {
			if strings.Contains(line, s) {
				problems = append(problems, fmt.Sprintf("log line %d contains the %s: %s", i, what, line))
			}
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			problems = append(problems, fmt.Sprintf("log line %d is not JSON: %s", i, line))
			continue
		}
		if _, emf := rec["_aws"]; emf {
			continue
		}
		has := false
		for _, k := range idKeys {
			if v, ok := rec[k]; ok && v != "" {
				seen[k]++
				has = true
			}
		}
		for _, k := range pluralKeys {
			if v, ok := rec[k].([]any); ok && len(v) > 0 {
				has = true
			}
		}
		if decision(rec) && !has {
			problems = append(problems, "decision line without nodeclaim/node/instance-id/nodepool/pod: "+line)
		}
	}
	return problems, seen
}

// The audit itself must catch what it looks for.
func TestAuditLogsCatches(t *testing.T) {
	planted := strings.Join([]string{
		`{"level":"INFO","msg":"got token","token":"k8s-aws-v1.aHR0cHM6Ly9zdHM"}`,
		`{"level":"INFO","msg":"webhook","path":"/validate/` + webhookSecret + `"}`,
		`{"level":"INFO","msg":"config","secret":"` + localcloud.SecretAccessKey + `"}`,
		`{"level":"INFO","msg":"launched instance","nodepool":""}`,
		`not json`,
		`{"level":"INFO","msg":"launched instance","nodeclaim":"default-abc","instance-id":"i-1"}`,
		`{"level":"INFO","msg":"terminated instances","instances":["i-1","i-2"]}`,
		`{"level":"DEBUG","msg":"evicting"}`,
	}, "\n")
	problems, seen := auditLogs([]byte(planted))
	if len(problems) != 5 {
		t.Errorf("want 5 problems (token, webhook secret, AWS key, launch without IDs, not JSON), got %d:\n%s", len(problems), strings.Join(problems, "\n"))
	}
	if seen["nodeclaim"] != 1 || seen["instance-id"] != 1 {
		t.Errorf("seen %v", seen)
	}
}

// decision reports whether a log record states something nodewright did or
// decided about a node, claim or pod (Info and above, not a pass summary):
// those are the lines a person searches by ID.
func decision(rec map[string]any) bool {
	lvl, _ := rec["level"].(string)
	if lvl == "DEBUG" {
		return false
	}
	msg, _ := rec["msg"].(string)
	msg = strings.ToLower(msg)
	// Pass summaries and launch templates (per EC2NodeClass) are not about
	// one node.
	if strings.Contains(msg, "pass") || strings.Contains(msg, "launch template") {
		return false
	}
	for _, verb := range []string{"launch", "terminat", "drain", "evict", "register", "initializ", "nominat", "disrupt", "delet", "mark", "cordon", "interrupt"} {
		if strings.Contains(msg, verb) {
			return true
		}
	}
	return false
}
