package queue

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// Invocation is what a function fed both by an SQS queue and by an
// EventBridge schedule (the provisioner, the lifecycle) was invoked with:
// an SQS batch, or a "Scheduled Event" tick when Scheduled is set.
type Invocation struct {
	SQS       events.SQSEvent
	Scheduled bool
}

// DecodeInvocation sniffs raw: a non-null "Records" is an SQS batch,
// "detail-type": "Scheduled Event" a schedule tick. Anything else is an
// error naming the event's detail-type and source, so a misrouted rule or
// manual invoke is visible instead of being taken for a tick.
func DecodeInvocation(raw json.RawMessage) (Invocation, error) {
	var probe struct {
		Records    json.RawMessage `json:"Records"`
		DetailType string          `json:"detail-type"`
		Source     string          `json:"source"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return Invocation{}, fmt.Errorf("decode event: %w", err)
	}
	switch {
	case len(probe.Records) > 0 && !bytes.Equal(bytes.TrimSpace(probe.Records), []byte("null")):
		var inv Invocation
		if err := json.Unmarshal(raw, &inv.SQS); err != nil {
			return Invocation{}, fmt.Errorf("decode SQS event: %w", err)
		}
		return inv, nil
	case probe.DetailType == "Scheduled Event":
		return Invocation{Scheduled: true}, nil
	default:
		return Invocation{}, fmt.Errorf("unrecognised event (neither SQS records nor a Scheduled Event; detail-type %q, source %q)", probe.DetailType, probe.Source)
	}
}
