package metrics

import (
	"bytes"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFlushWritesEMF(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, Dimensions{"cluster": "demo"})
	r.now = func() time.Time { return time.UnixMilli(1700000000000) }
	r.Add(NodeClaimsCreated, 1, Dimensions{"nodepool": "default", "reason": "provisioning"})
	r.Add(NodeClaimsCreated, 2, Dimensions{"nodepool": "default", "reason": "provisioning"})
	r.Observe(SchedulingDuration, Seconds, 0.25, nil)
	r.Observe(SchedulingDuration, Seconds, 0.5, nil)
	r.Gauge(PodsPending, 7, nil)
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("want 2 lines (two dimension sets), got %d:\n%s", len(lines), buf.String())
	}
	var found bool
	for _, l := range lines {
		var doc map[string]any
		if err := json.Unmarshal([]byte(l), &doc); err != nil {
			t.Fatal(err)
		}
		aws := doc["_aws"].(map[string]any)
		if aws["Timestamp"].(float64) != 1700000000000 {
			t.Fatalf("timestamp %v", aws["Timestamp"])
		}
		cw := aws["CloudWatchMetrics"].([]any)[0].(map[string]any)
		if cw["Namespace"] != Namespace {
			t.Fatalf("namespace %v", cw["Namespace"])
		}
		if v, ok := doc[NodeClaimsCreated]; ok {
			found = true
			if v.(float64) != 3 || doc["nodepool"] != "default" || doc["cluster"] != "demo" {
				t.Fatalf("counter line wrong: %s", l)
			}
			dims := cw["Dimensions"].([]any)[0].([]any)
			if len(dims) != 3 {
				t.Fatalf("dimensions %v", dims)
			}
		} else if vals, ok := doc[SchedulingDuration].([]any); !ok || len(vals) != 2 || doc[PodsPending].(float64) != 7 {
			t.Fatalf("histogram/gauge line wrong: %s", l)
		}
	}
	if !found {
		t.Fatal("counter not flushed")
	}
	buf.Reset()
	if err := r.Flush(); err != nil || buf.Len() != 0 {
		t.Fatalf("second flush wrote %q (%v)", buf.String(), err)
	}
}

func TestRecorderConcurrentAndNil(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, nil)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 1000; j++ {
				r.Add(InterruptionMessages, 1, Dimensions{"message_type": "spot_interrupted"})
			}
		}()
	}
	wg.Wait()
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `"karpenter_interruption_received_messages_total":8000`) {
		t.Fatalf("lost increments: %s", buf.String())
	}
	var nilRec *Recorder
	nilRec.Add(NodeClaimsCreated, 1, nil) // callers may run without metrics
	if err := nilRec.Flush(); err != nil {
		t.Fatal(err)
	}
}
