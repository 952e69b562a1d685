package eventsamples

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// Read returns the events/ sample called name, found from the test's
// package directory up to the module root.
func Read(tb testing.TB, name string) []byte {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("eventsamples: no go.mod above the test's directory")
		}
		dir = parent
	}
	data, err := os.ReadFile(filepath.Join(dir, "events", name))
	if err != nil {
		tb.Fatal(err)
	}
	return data
}

// InterruptionBodies are the SQS message bodies the interruption queue
// receives: every EventBridge envelope sample (spot warning, rebalance,
// state changes, AWS Health, capacity reservation warning) and the bodies of the SQS batch sample.
func InterruptionBodies(tb testing.TB) []string {
	tb.Helper()
	var out []string
	for _, name := range []string{"spot-interruption-warning.json", "rebalance-recommendation.json", "state-change-stopping.json",
		"state-change-terminated.json", "health-scheduled-change.json", "health-scheduled-change-dedicated-host.json",
		"capacity-reservation-interruption-warning.json"} {
		out = append(out, strings.TrimSpace(string(Read(tb, name))))
	}
	var batch events.SQSEvent
	if err := json.Unmarshal(Read(tb, "sqs-batch.json"), &batch); err != nil {
		tb.Fatalf("eventsamples: sqs-batch.json: %v", err)
	}
	for _, r := range batch.Records {
		out = append(out, r.Body)
	}
	return out
}
