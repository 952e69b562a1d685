package queue

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeInvocation(t *testing.T) {
	inv, err := DecodeInvocation(json.RawMessage(`{"Records":[{"messageId":"m1","body":"{}"}]}`))
	if err != nil || inv.Scheduled || len(inv.SQS.Records) != 1 || inv.SQS.Records[0].MessageId != "m1" {
		t.Fatalf("SQS batch: %+v, %v", inv, err)
	}
	inv, err = DecodeInvocation(json.RawMessage(`{"detail-type":"Scheduled Event","source":"aws.events","detail":{}}`))
	if err != nil || !inv.Scheduled || inv.SQS.Records != nil {
		t.Fatalf("schedule tick: %+v, %v", inv, err)
	}
	for _, raw := range []string{
		`{"Records":null,"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2"}`,
		`{}`,
	} {
		_, err := DecodeInvocation(json.RawMessage(raw))
		if err == nil || !strings.Contains(err.Error(), "unrecognised event") {
			t.Errorf("%s: got %v, want an unrecognised event error", raw, err)
		}
	}
	if _, err := DecodeInvocation(json.RawMessage(`[1]`)); err == nil || !strings.Contains(err.Error(), "decode event") {
		t.Errorf("not an object: got %v", err)
	}
	if _, err := DecodeInvocation(json.RawMessage(`{"Records":{"x":1}}`)); err == nil || !strings.Contains(err.Error(), "decode SQS event") {
		t.Errorf("Records not a list: got %v", err)
	}
}
