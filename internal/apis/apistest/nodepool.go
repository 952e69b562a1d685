// Package apistest builds NodePool and EC2NodeClass YAML for unit tests, so
// a test states only what matters to it (instance types, capacity types,
// limits, budgets) instead of pasting a whole document with placeholders.
// Pool.YAML and NodeClass.YAML write one document each, Doc joins
// documents, and Load reads them with the real loader (apis.LoadData), so
// what a test gets is defaulted and validated exactly as users' files are.
// It starts nothing and holds no state.
package apistest

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
)

// Req is one requirement of a NodePool's template.
type Req struct {
	Key    string
	Op     string // In, NotIn, Exists, DoesNotExist, Gt, Lt
	Values []string
}

// In is the requirement that Key is one of values.
func In(key string, values ...string) Req { return Req{Key: key, Op: "In", Values: values} }

// Taint is a taint of a NodePool's template.
type Taint struct{ Key, Value, Effect string }

// Budget is one disruption budget; empty fields are left out.
type Budget struct {
	Nodes    string // "10%", "3"
	Schedule string // cron, UTC
	Duration string // "1h"
	Reasons  []string
}

// Pool is a karpenter.sh/v1 NodePool. Empty fields are left out of the
// document (Karpenter's defaults apply), except Name and NodeClass, which
// default to "default".
type Pool struct {
	Name         string
	NodeClass    string // the EC2NodeClass the pool's nodeClassRef names
	Labels       map[string]string
	Requirements []Req
	Taints       []Taint
	// StartupTaints are the taints a node's agent removes once it is ready.
	StartupTaints []Taint
	ExpireAfter   string // "720h", "Never"
	// TerminationGracePeriod bounds a node's drain ("1h").
	TerminationGracePeriod string
	// ConsolidationPolicy, ConsolidateAfter and Budgets are spec.disruption.
	ConsolidationPolicy string
	ConsolidateAfter    string
	Budgets             []Budget
	Limits              map[string]string // "cpu": "4"
	Weight              int               // 0: unweighted
	// Replicas, when not nil, makes the pool static (spec.replicas).
	Replicas *int64
}

// YAML is the pool as one YAML document.
func (p Pool) YAML() string {
	var b strings.Builder
	line := func(indent int, s string) {
		b.WriteString(strings.Repeat(" ", indent))
		b.WriteString(s)
		b.WriteByte('\n')
	}
	line(0, "apiVersion: "+apis.NodePoolAPIV1)
	line(0, "kind: "+apis.NodePoolKind)
	line(0, "metadata:")
	line(2, "name: "+or(p.Name, "default"))
	line(0, "spec:")
	line(2, "template:")
	if len(p.Labels) > 0 {
		line(4, "metadata:")
		line(6, "labels:")
		writeMap(line, 8, p.Labels)
	}
	line(4, "spec:")
	if len(p.Requirements) == 0 {
		line(6, "requirements: []")
	} else {
		line(6, "requirements:")
	}
	for _, r := range p.Requirements {
		line(8, "- key: "+q(r.Key))
		line(10, "operator: "+r.Op)
		if len(r.Values) > 0 {
			line(10, "values: "+list(r.Values))
		}
	}
	writeTaints(line, "taints:", p.Taints)
	writeTaints(line, "startupTaints:", p.StartupTaints)
	line(6, "nodeClassRef:")
	line(8, "group: "+apis.AWSGroup)
	line(8, "kind: "+apis.EC2NodeClassKind)
	line(8, "name: "+or(p.NodeClass, "default"))
	if p.ExpireAfter != "" {
		line(6, "expireAfter: "+q(p.ExpireAfter))
	}
	if p.TerminationGracePeriod != "" {
		line(6, "terminationGracePeriod: "+q(p.TerminationGracePeriod))
	}
	p.writeDisruption(line)
	if len(p.Limits) > 0 {
		line(2, "limits:")
		writeMap(line, 4, p.Limits)
	}
	if p.Weight != 0 {
		line(2, "weight: "+strconv.Itoa(p.Weight))
	}
	if p.Replicas != nil {
		line(2, "replicas: "+strconv.FormatInt(*p.Replicas, 10))
	}
	return b.String()
}

func writeTaints(line func(int, string), field string, ts []Taint) {
	if len(ts) > 0 {
		line(6, field)
	}
	for _, t := range ts {
		line(8, "- key: "+q(t.Key))
		if t.Value != "" {
			line(10, "value: "+q(t.Value))
		}
		line(10, "effect: "+t.Effect)
	}
}

func (p Pool) writeDisruption(line func(int, string)) {
	if p.ConsolidationPolicy == "" && p.ConsolidateAfter == "" && p.Budgets == nil {
		return
	}
	line(2, "disruption:")
	if p.ConsolidationPolicy != "" {
		line(4, "consolidationPolicy: "+p.ConsolidationPolicy)
	}
	if p.ConsolidateAfter != "" {
		line(4, "consolidateAfter: "+q(p.ConsolidateAfter))
	}
	if p.Budgets != nil {
		line(4, "budgets:")
	}
	for _, bu := range p.Budgets {
		line(6, "- nodes: "+q(bu.Nodes))
		if bu.Schedule != "" {
			line(8, "schedule: "+q(bu.Schedule))
		}
		if bu.Duration != "" {
			line(8, "duration: "+q(bu.Duration))
		}
		if len(bu.Reasons) > 0 {
			line(8, "reasons: "+list(bu.Reasons))
		}
	}
}

// NodeClass is a karpenter.k8s.aws/v1 EC2NodeClass whose subnets and
// security groups are found by the karpenter.sh/discovery tag. Empty fields
// take the defaults in brackets.
type NodeClass struct {
	Name      string // ["default"]
	AMIAlias  string // ["al2023@latest"]
	Role      string // ["NodeRole"]
	Discovery string // the karpenter.sh/discovery tag's value ["test"]
}

// YAML is the node class as one YAML document.
func (c NodeClass) YAML() string {
	tags := "    - tags: {karpenter.sh/discovery: " + q(or(c.Discovery, "test")) + "}\n"
	return "apiVersion: " + apis.NodeClassAPIV1 + "\n" +
		"kind: " + apis.EC2NodeClassKind + "\n" +
		"metadata:\n" +
		"  name: " + or(c.Name, "default") + "\n" +
		"spec:\n" +
		"  amiSelectorTerms:\n" +
		"    - alias: " + q(or(c.AMIAlias, "al2023@latest")) + "\n" +
		"  role: " + q(or(c.Role, "NodeRole")) + "\n" +
		"  subnetSelectorTerms:\n" + tags +
		"  securityGroupSelectorTerms:\n" + tags
}

// Doc joins YAML documents into one stream, "---" between them.
func Doc(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(p)
		if !strings.HasSuffix(p, "\n") {
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// Load loads yaml with apis.LoadData as the file "pool.yaml", failing the
// test if it does not load.
func Load(t testing.TB, yaml string) *apis.Config {
	t.Helper()
	cfg, err := apis.LoadData("pool.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("load the test's NodePools: %v\n%s", err, yaml)
	}
	return cfg
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// q quotes s as a YAML double-quoted scalar (JSON's quoting is a subset).
func q(s string) string { return strconv.Quote(s) }

func list(vs []string) string {
	qs := make([]string, len(vs))
	for i, v := range vs {
		qs[i] = q(v)
	}
	return "[" + strings.Join(qs, ", ") + "]"
}

func writeMap(line func(int, string), indent int, m map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		line(indent, q(k)+": "+q(m[k]))
	}
}
