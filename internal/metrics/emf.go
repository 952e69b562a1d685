// Package metrics records Karpenter-named metrics and flushes them as
// CloudWatch Embedded Metric Format: one JSON log line per flush, which
// CloudWatch Logs turns into metrics with no PutMetricData calls.
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

// Metric names, matching Karpenter's Prometheus metrics where one exists.
const (
	NodeClaimsCreated          = "karpenter_nodeclaims_created_total"
	NodeClaimsTerminated       = "karpenter_nodeclaims_terminated_total"
	NodeClaimsDisrupted        = "karpenter_nodeclaims_disrupted_total"
	PodsPending                = "karpenter_pods_pending"
	PodsNominated              = "karpenter_pods_nominated_total"
	PodsUnschedulable          = "karpenter_pods_unschedulable"
	OldestPendingPodSeconds    = "karpenter_pods_oldest_pending_seconds"
	SchedulingDuration         = "karpenter_provisioner_scheduling_duration_seconds"
	ProvisionerBatchSize       = "karpenter_provisioner_batch_size"
	DisruptionDecisions        = "karpenter_voluntary_disruption_decisions_total"
	DisruptionEligibleNodes    = "karpenter_voluntary_disruption_eligible_nodes"
	DisruptionActions          = "karpenter_disruption_actions_performed_total"
	InterruptionMessages       = "karpenter_interruption_received_messages_total"
	InterruptionMessageLatency = "karpenter_interruption_message_queue_duration_seconds"
	EvictionRequests           = "karpenter_nodes_eviction_requests_total"
	CloudProviderErrors        = "karpenter_cloudprovider_errors_total"
	ClusterCostPerHour         = "nodewright_cluster_cost_per_hour"
	WebhookNudges              = "nodewright_webhook_nudges_total"
	// GCRefused counts lifecycle passes whose instance garbage collection
	// would have taken more than the bounded share of the fleet and did
	// nothing instead (alarmed: a fresh or foreign table looks like this).
	GCRefused = "nodewright_gc_refused_total"
	// NodeClaimsUndecodable counts NodeClaim records a listing skipped
	// because they could not be decoded (alarmed).
	NodeClaimsUndecodable = "nodewright_nodeclaims_undecodable_total"
	// FunctionRuns is every function's heartbeat: one per successful
	// invocation, by function (alarmed with missing data as breaching).
	FunctionRuns = "nodewright_function_runs_total"
)

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
	w        io.Writer
	now      func() time.Time
	static   Dimensions
	mu       sync.Mutex
	series   map[string]*series
	maxBatch int
}

// New returns a Recorder writing EMF lines to w. static dimensions (such as
// the cluster name and function) are added to every metric.
func New(w io.Writer, static Dimensions) *Recorder {
	return &Recorder{w: w, now: time.Now, static: static, series: map[string]*series{}, maxBatch: 100}
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
		if err := r.writeLine(ts, g); err != nil {
			return err
		}
	}
	return nil
}

func dimKey(d Dimensions) string { return seriesKey("", d) }

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
			// EMF caps a metric's value array at 100 entries.
			vals := s.values
			if len(vals) > r.maxBatch {
				vals = vals[len(vals)-r.maxBatch:]
			}
			doc[s.name] = vals
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
