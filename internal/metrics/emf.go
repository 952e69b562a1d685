// Package metrics records Karpenter-named metrics and flushes them as
// CloudWatch Embedded Metric Format: JSON log lines (one per dimension set,
// more when EMF's limits require) which CloudWatch Logs turns into metrics
// with no PutMetricData calls.
package metrics

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// Namespace is the CloudWatch namespace every nodewright metric lands in; the
// CDK dashboard and alarms read from it.
const Namespace = "nodewright"

// Unit is a CloudWatch unit name.
type Unit string

// Units used by nodewright metrics.
const (
	Count   Unit = "Count"
	Seconds Unit = "Seconds"
	None    Unit = "None"
)

// Dimensions are a metric's label set, e.g. {"nodepool": "default"}.
type Dimensions map[string]string

type series struct {
	name   string
	unit   Unit
	dims   Dimensions
	values []float64
}

// Recorder accumulates metrics between flushes. Safe for concurrent use.
type Recorder struct {
	w      io.Writer
	now    func() time.Time
	static Dimensions
	mu     sync.Mutex
	series map[string]*series
}

// EMF limits (CloudWatch rejects a line beyond them, losing all its values):
// at most 100 values in one metric's array and 100 metrics in one directive.
// A flush writes more lines instead of dropping anything.
const (
	maxValuesPerMetric = 100
	maxMetricsPerLine  = 100
)

// New returns a Recorder writing EMF lines to w. static dimensions (such as
// the cluster name and function) are added to every metric.
func New(w io.Writer, static Dimensions) *Recorder {
	return &Recorder{w: w, now: time.Now, static: static, series: map[string]*series{}}
}

// Add records a counter increment.
func (r *Recorder) Add(name string, v float64, dims Dimensions) { r.record(name, Count, v, dims) }

// Observe records a duration or size sample.
func (r *Recorder) Observe(name string, unit Unit, v float64, dims Dimensions) {
	r.record(name, unit, v, dims)
}

// Gauge records a point-in-time value.
func (r *Recorder) Gauge(name string, v float64, dims Dimensions) { r.record(name, None, v, dims) }

func (r *Recorder) record(name string, unit Unit, v float64, dims Dimensions) {
	if r == nil {
		return
	}
	key := seriesKey(name, dims)
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.series[key]
	if !ok {
		s = &series{name: name, unit: unit, dims: dims}
		r.series[key] = s
	}
	if unit == Count && len(s.values) == 1 {
		// Counters are summed locally: one value per flush is enough.
		s.values[0] += v
		return
	}
	s.values = append(s.values, v)
}

func seriesKey(name string, dims Dimensions) string {
	keys := make([]string, 0, len(dims))
	for k := range dims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	for _, k := range keys {
		b.WriteByte('|')
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(dims[k])
	}
	return b.String()
}

// Flush writes one EMF line per distinct dimension set and resets the
// recorder. Lambda handlers call it before returning.
func (r *Recorder) Flush() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	all := r.series
	r.series = map[string]*series{}
	r.mu.Unlock()
	if len(all) == 0 {
		return nil
	}
	// Metrics sharing a dimension set share a line, as EMF requires one
	// dimension set per directive for its values to be attributed correctly.
	groups := map[string][]*series{}
	for _, s := range all {
		groups[dimKey(s.dims)] = append(groups[dimKey(s.dims)], s)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	ts := r.now().UnixMilli()
	for _, k := range keys {
		g := groups[k]
		sort.Slice(g, func(i, j int) bool { return g[i].name < g[j].name })
		for _, line := range splitLines(g) {
			if err := r.writeLine(ts, line); err != nil {
				return err
			}
		}
	}
	return nil
}

func dimKey(d Dimensions) string { return seriesKey("", d) }

// splitLines cuts series sharing one dimension set into lines within EMF's
// limits: at most maxMetricsPerLine metrics a line, and a metric with more
// than maxValuesPerMetric values continues on further lines, so every value
// recorded is written.
func splitLines(g []*series) [][]*series {
	var lines [][]*series
	for start := 0; start < len(g); start += maxMetricsPerLine {
		metricsChunk := g[start:min(start+maxMetricsPerLine, len(g))]
		for off := 0; ; off += maxValuesPerMetric {
			var line []*series
			for _, s := range metricsChunk {
				if off < len(s.values) {
					line = append(line, &series{name: s.name, unit: s.unit, dims: s.dims,
						values: s.values[off:min(off+maxValuesPerMetric, len(s.values))]})
				}
			}
			if len(line) == 0 {
				break
			}
			lines = append(lines, line)
		}
	}
	return lines
}

func (r *Recorder) writeLine(ts int64, g []*series) error {
	doc := map[string]any{}
	dimNames := []string{}
	for k, v := range r.static {
		doc[k] = v
		dimNames = append(dimNames, k)
	}
	for k, v := range g[0].dims {
		doc[k] = v
		dimNames = append(dimNames, k)
	}
	sort.Strings(dimNames)
	defs := make([]map[string]string, 0, len(g))
	for _, s := range g {
		defs = append(defs, map[string]string{"Name": s.name, "Unit": string(s.unit)})
		if len(s.values) == 1 {
			doc[s.name] = s.values[0]
		} else {
			doc[s.name] = s.values
		}
	}
	doc["_aws"] = map[string]any{
		"Timestamp": ts,
		"CloudWatchMetrics": []map[string]any{{
			"Namespace":  Namespace,
			"Dimensions": [][]string{dimNames},
			"Metrics":    defs,
		}},
	}
	line, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("encode metrics: %w", err)
	}
	if _, err := r.w.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("write metrics: %w", err)
	}
	return nil
}
