package queue

import (
	"encoding/json"
	"testing"

	"github.com/nodewright/nodewright/internal/eventsamples"
)

// FuzzDecodeInvocation feeds arbitrary invocation payloads and the work
// messages inside them. Properties: no panic; an invocation is an SQS batch
// or a schedule tick, never both, or an error naming what it was; every
// record body parses to a known kind or to an error (which the handlers
// turn into a batch item failure, so the DLQ keeps it).
//
//	go test -run '^$' -fuzz '^FuzzDecodeInvocation$' -fuzztime 60s ./internal/queue
func FuzzDecodeInvocation(f *testing.F) {
	f.Add(eventsamples.Read(f, "sqs-batch.json"))
	f.Add([]byte(`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`))
	f.Add([]byte(`{"Records":[{"messageId":"m1","body":"{\"kind\":\"lifecycle\",\"subject\":\"c\",\"chain\":\"ab\",\"notBefore\":\"2026-11-25T00:00:00Z\"}"}]}`))
	f.Add([]byte(`{"Records":[{"messageId":"m2","body":"{\"kind\":\"disruption\",\"reason\":\"consolidateAfter of node n\"}"}]}`))
	f.Add([]byte(`{"Records":null,"detail-type":"Scheduled Event"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		inv, err := DecodeInvocation(raw)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if inv.Scheduled && len(inv.SQS.Records) > 0 {
			t.Fatal("both a tick and an SQS batch")
		}
		for _, r := range inv.SQS.Records {
			msg, err := Parse(r.Body)
			if err != nil {
				continue
			}
			if msg.Kind != KindProvision && msg.Kind != KindLifecycle && msg.Kind != KindDisruption {
				t.Fatalf("accepted kind %q", msg.Kind)
			}
			b, err := json.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := Parse(string(b)); err != nil || back.Kind != msg.Kind || back.Subject != msg.Subject || back.Chain != msg.Chain {
				t.Fatalf("round trip of %+v: %+v %v", msg, back, err)
			}
		}
	})
}
