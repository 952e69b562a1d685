package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/metrics"
)

// Malformed work items are reported as batch item failures (so SQS parks
// them in the DLQ), never dropped; unknown events are errors.
func TestHandlerRejectsBadInput(t *testing.T) {
	e := newEnv(t)
	h := e.handler(e.deps())
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "bad-json", Body: "{"},
		{MessageId: "wrong-kind", Body: `{"kind":"provision","sentAt":"2026-11-22T00:00:00Z"}`},
		{MessageId: "no-subject", Body: `{"kind":"lifecycle","sentAt":"2026-11-22T00:00:00Z"}`},
		{MessageId: "gone-claim", Body: `{"kind":"lifecycle","subject":"never-existed","sentAt":"2026-11-22T00:00:00Z"}`},
	}}
	raw, _ := json.Marshal(ev)
	res, err := h.Handle(e.ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	failed := map[string]bool{}
	for _, f := range res.(events.SQSEventResponse).BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, id := range []string{"bad-json", "wrong-kind", "no-subject"} {
		if !failed[id] {
			t.Errorf("%s not reported as a failure", id)
		}
	}
	if failed["gone-claim"] {
		t.Error("a message about a deleted claim is done, not a failure")
	}
	if _, err := h.Handle(e.ctx, json.RawMessage(`{"detail-type":"Something Else","source":"x"}`)); err == nil {
		t.Error("unknown event accepted")
	}
}

// failingStore fails every write to one claim, as a claim whose record
// DynamoDB keeps refusing (or whose update always conflicts) does.
type failingStore struct {
	lifecycle.Store
	claim string
}

func (s failingStore) MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	if name == s.claim {
		return nil, errors.New("injected: the claim's record cannot be written")
	}
	return s.Store.MutateNodeClaim(ctx, name, fn)
}

// One claim that fails does not fail the scheduled pass: the invocation
// succeeds (EventBridge's asynchronous invocation would otherwise be
// retried and the heartbeat would page) while the other claims progress,
// and the failure is logged and counted in metrics.LifecycleFailures. On
// the work queue the failing claim's message alone is a batch item
// failure, so SQS retries it alone.
func TestOneFailingClaimDoesNotFailThePass(t *testing.T) {
	e := newEnv(t)
	d := e.deps()
	var emf, logs bytes.Buffer
	d.Metrics = metrics.New(&emf, nil)
	d.Log = slog.New(slog.NewJSONHandler(&logs, nil))
	good, bad := e.launchClaim("pass-good"), e.launchClaim("pass-bad")
	d.Store = failingStore{Store: d.Store, claim: bad.Name}
	h := e.handler(d)

	reported := false
	deadline := time.Now().Add(60 * time.Second)
	for {
		for _, msg := range e.tick(h).Errors { // fails the test if the pass fails
			reported = reported || strings.Contains(msg, bad.Name)
		}
		cl, err := e.st.GetNodeClaim(e.ctx, good.Name)
		if err != nil {
			t.Fatal(err)
		}
		if reported && cl.IsTrue(apis.ConditionRegistered) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60 s of passes: %s registered %v, %s's failure reported %v", good.Name, cl.IsTrue(apis.ConditionRegistered), bad.Name, reported)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if cl, err := e.st.GetNodeClaim(e.ctx, bad.Name); err != nil || cl.IsTrue(apis.ConditionRegistered) {
		t.Errorf("%s registered although its writes fail: %+v %v", bad.Name, cl, err)
	}
	if !strings.Contains(emf.String(), metrics.LifecycleFailures) {
		t.Errorf("no %s in the metrics: %s", metrics.LifecycleFailures, emf.String())
	}
	if !strings.Contains(logs.String(), `"nodeclaim":"`+bad.Name+`"`) {
		t.Errorf("the failing claim is not named in an ERROR log line:\n%s", logs.String())
	}

	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "good", Body: fmt.Sprintf(`{"kind":"lifecycle","subject":%q,"sentAt":"2026-11-22T00:00:00Z"}`, good.Name)},
		{MessageId: "bad", Body: fmt.Sprintf(`{"kind":"lifecycle","subject":%q,"sentAt":"2026-11-22T00:00:00Z"}`, bad.Name)},
	}}
	raw, _ := json.Marshal(ev)
	out, err := h.Handle(e.ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, f := range out.(events.SQSEventResponse).BatchItemFailures {
		failed = append(failed, f.ItemIdentifier)
	}
	if strings.Join(failed, ",") != "bad" {
		t.Errorf("batch item failures %v, want the failing claim's message alone", failed)
	}
}
