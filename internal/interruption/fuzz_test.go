package interruption

import (
	"errors"
	"reflect"
	"testing"

	"github.com/nodewright/nodewright/internal/eventsamples"
)

// FuzzMessage feeds arbitrary SQS bodies to the interruption function.
// Properties: no panic; parsing is deterministic; a rejection is
// ErrMalformed with a message, and the handler reports that body as a batch
// item failure (so the redrive parks it in the DLQ) and touches nothing.
//
//	go test -run '^$' -fuzz '^FuzzMessage$' -fuzztime 60s ./internal/interruption
func FuzzMessage(f *testing.F) {
	for _, body := range eventsamples.InterruptionBodies(f) {
		f.Add(body)
	}
	f.Add(`{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{}}`)
	f.Add(`{"detail-type":"AWS Health Event","source":"aws.health","detail":{"affectedEntities":[{"entityValue":""}]}}`)
	// One fixture for every input: a malformed body must leave it untouched,
	// and building a fake cluster per input would make the fuzzer crawl.
	var fx *fixture
	f.Fuzz(func(t *testing.T, body string) {
		msg, err := Parse(body)
		again, errAgain := Parse(body)
		if (err == nil) != (errAgain == nil) || !reflect.DeepEqual(msg, again) {
			t.Fatalf("Parse is not deterministic: %+v/%v vs %+v/%v", msg, err, again, errAgain)
		}
		if err != nil && (!errors.Is(err, ErrMalformed) || err.Error() == ErrMalformed.Error()) {
			t.Fatalf("rejection is not a described ErrMalformed: %v", err)
		}
		if err == nil {
			return // well-formed messages are the controller tests' business
		}
		if fx == nil {
			fx = newFixture(t, "")
		}
		resp := fx.handle(t, body)
		if got := failures(resp); len(got) != 1 || got[0] != "m0" {
			t.Fatalf("malformed body %q: batch item failures %v, want it kept for the DLQ", body, got)
		}
		if fx.passes != 0 || len(fx.term.steps) != 0 || fx.st.writes != 0 || len(fx.cloud.terminated) != 0 {
			t.Fatalf("malformed body %q touched something", body)
		}
	})
}
