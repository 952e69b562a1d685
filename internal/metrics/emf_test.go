package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// EMF takes at most 100 values per metric and 100 metrics per directive; a
// flush beyond either writes more lines and loses nothing.
func TestFlushSplitsInsteadOfDropping(t *testing.T) {
	var buf bytes.Buffer
	r := New(&buf, Dimensions{"cluster": "demo"})
	for i := range 250 {
		r.Observe(SchedulingDuration, Seconds, float64(i), nil)
	}
	r.Gauge(PodsPending, 3, nil)
	for i := range 150 { // 150 distinct metrics sharing one dimension set
		r.Add(fmt.Sprintf("nodewright_test_%03d_total", i), 1, nil)
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	var durations []float64
	metricsSeen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var doc map[string]any
		if err := json.Unmarshal([]byte(l), &doc); err != nil {
			t.Fatal(err)
		}
		defs := doc["_aws"].(map[string]any)["CloudWatchMetrics"].([]any)[0].(map[string]any)["Metrics"].([]any)
		if len(defs) > maxMetricsPerLine {
			t.Errorf("line with %d metrics", len(defs))
		}
		for _, d := range defs {
			name := d.(map[string]any)["Name"].(string)
			metricsSeen[name]++
			if vals, ok := doc[name].([]any); ok {
				if len(vals) > maxValuesPerMetric {
					t.Errorf("%s: %d values on one line", name, len(vals))
				}
				if name == SchedulingDuration {
					for _, v := range vals {
						durations = append(durations, v.(float64))
					}
				}
			} else if _, ok := doc[name].(float64); !ok {
				t.Errorf("%s declared without a value: %s", name, l)
			}
		}
	}
	if len(durations) != 250 || durations[0] != 0 || durations[249] != 249 {
		t.Errorf("durations: %d values, want all 250 in order", len(durations))
	}
	if len(metricsSeen) != 152 || metricsSeen[SchedulingDuration] != 3 || metricsSeen[PodsPending] != 1 {
		t.Errorf("metrics written %d, durations on %d lines, pending on %d", len(metricsSeen), metricsSeen[SchedulingDuration], metricsSeen[PodsPending])
	}
}
