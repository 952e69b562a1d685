package inspect

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/nodewright/nodewright/internal/apis"
)

// PoolUsage is one NodePool's footprint: what its live claims' capacity adds
// up to (as Karpenter's nodepool.status.resources) against its limits, and
// what its nodes cost per hour.
type PoolUsage struct {
	Name string `json:"name"`
	// Configured is false for a pool that has claims but is absent from the
	// configuration given (removed, or no --config).
	Configured bool                `json:"configured"`
	NodeClass  string              `json:"nodeClass,omitempty"`
	Weight     *int32              `json:"weight,omitempty"`
	Nodes      int                 `json:"nodes"`
	Ready      int                 `json:"ready"`
	Deleting   int                 `json:"deleting"`
	Used       corev1.ResourceList `json:"used"`
	Limits     apis.Limits         `json:"limits,omitempty"`
	// Replicas is a static pool's node count (spec.replicas); nil for a
	// dynamic pool.
	Replicas *int64 `json:"replicas,omitempty"`
	// CostPerHour sums the known prices; Unpriced counts claims without one.
	CostPerHour float64 `json:"costPerHour"`
	Unpriced    int     `json:"unpriced,omitempty"`
}

// poolsOutput is the json/yaml shape of `get nodepools`.
type poolsOutput struct {
	NodePools   []PoolUsage `json:"nodePools"`
	Nodes       int         `json:"nodes"`
	CostPerHour float64     `json:"costPerHour"`
}

// NodePoolName is the pool as `kubectl get -o name` prints it.
func NodePoolName(name string) string { return "nodepool.karpenter.sh/" + name }

// resourceNodes is the "nodes" key of NodePool limits.
const resourceNodes corev1.ResourceName = "nodes"

// Usage computes each pool's usage from claims (tombstones are ignored) and
// cfg (may be nil). Pools are sorted by name; configured pools without claims
// are listed with zero usage.
func Usage(cfg *apis.Config, claims []Claim, prices Prices) []PoolUsage {
	byName := map[string]*PoolUsage{}
	get := func(name string) *PoolUsage {
		if u, ok := byName[name]; ok {
			return u
		}
		u := &PoolUsage{Name: name, Used: corev1.ResourceList{}}
		byName[name] = u
		return u
	}
	if cfg != nil {
		for _, np := range cfg.NodePools {
			u := get(np.Name)
			u.Configured = true
			u.Limits = np.Spec.Limits
			u.Weight = np.Spec.Weight
			u.Replicas = np.Spec.Replicas
			if nc := cfg.NodeClassFor(np); nc != nil {
				u.NodeClass = nc.Name
			} else if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
				u.NodeClass = ref.Name
			}
		}
	}
	for _, c := range claims {
		if c.Tombstoned() {
			continue
		}
		u := get(c.NodePoolName())
		u.Nodes++
		if Ready(c.NodeClaim) == "True" {
			u.Ready++
		}
		if c.Deleting() {
			u.Deleting++
		}
		for k, q := range c.Status.Capacity {
			sum := u.Used[k]
			sum.Add(q)
			u.Used[k] = sum
		}
		if p, ok := prices.ClaimPrice(c.NodeClaim); ok {
			u.CostPerHour += p
		} else {
			u.Unpriced++
		}
	}
	out := make([]PoolUsage, 0, len(byName))
	for _, u := range byName {
		out = append(out, *u)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// WriteNodePools prints pool usage in one of the Output* formats (wide is
// the table). The table has NODES, CPU and MEMORY as used/limit (just used
// when unlimited; a static pool's NODES as nodes/replicas), other limited
// resources in LIMITS, the pool's cost per hour and, unless NoHeaders, a final line with the cluster total. No pools
// print nothing (the caller tells people).
func WriteNodePools(w io.Writer, pools []PoolUsage, o PrintOptions) error {
	var total float64
	var nodes int
	names := make([]string, 0, len(pools))
	for _, u := range pools {
		total += u.CostPerHour
		nodes += u.Nodes
		names = append(names, NodePoolName(u.Name))
	}
	obj := poolsOutput{NodePools: append([]PoolUsage{}, pools...), Nodes: nodes, CostPerHour: total}
	if done, err := writeData(w, o.Output, obj, names); done || len(pools) == 0 {
		return err
	}
	header := o.header([]string{"NAME", "NODECLASS", "WEIGHT", "NODES", "READY", "CPU", "MEMORY", "LIMITS", "COST/H"})
	rows := make([][]string, 0, len(pools))
	for _, u := range pools {
		rows = append(rows, poolRow(u))
	}
	if err := WriteTable(w, header, rows); err != nil || o.NoHeaders {
		return err
	}
	_, err := fmt.Fprintf(w, "\nTotal: %d nodes, $%.4f/h (~$%.0f/month at 730 h)\n", nodes, total, total*730)
	return err
}

// poolRow is one pool's row of the table.
func poolRow(u PoolUsage) []string {
	nodeClass := orNone(u.NodeClass)
	if !u.Configured {
		nodeClass = "<not configured>"
	}
	weight := ""
	if u.Weight != nil {
		weight = strconv.Itoa(int(*u.Weight))
	}
	nodesCol := strconv.Itoa(u.Nodes)
	if l, ok := u.Limits[resourceNodes]; ok {
		nodesCol += "/" + l.String()
	}
	if u.Replicas != nil {
		nodesCol = fmt.Sprintf("%d/%d replicas", u.Nodes, *u.Replicas)
	}
	if u.Deleting > 0 {
		nodesCol += fmt.Sprintf(" (%d deleting)", u.Deleting)
	}
	var others []string
	keys := make([]string, 0, len(u.Limits))
	for k := range u.Limits {
		if k != corev1.ResourceCPU && k != corev1.ResourceMemory && k != resourceNodes {
			keys = append(keys, string(k))
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		others = append(others, k+"="+usedOf(u, corev1.ResourceName(k), formatQuantity))
	}
	cost := fmt.Sprintf("$%.4f", u.CostPerHour)
	if u.Unpriced > 0 {
		cost += fmt.Sprintf(" (+%d unpriced)", u.Unpriced)
	}
	return []string{u.Name, nodeClass, orNone(weight), nodesCol, strconv.Itoa(u.Ready),
		usedOf(u, corev1.ResourceCPU, formatQuantity), usedOf(u, corev1.ResourceMemory, formatMemory),
		orNone(strings.Join(others, ",")), cost}
}

// usedOf formats "used/limit" (just "used" when the pool has no such limit).
func usedOf(u PoolUsage, k corev1.ResourceName, format func(resource.Quantity) string) string {
	used := format(u.Used[k])
	if l, ok := u.Limits[k]; ok {
		return used + "/" + format(l)
	}
	return used
}

func formatQuantity(q resource.Quantity) string {
	if q.IsZero() {
		return "0"
	}
	return q.String()
}

// formatMemory prints bytes in Gi (capacity comes in Ki from kubelets, limits
// in whatever the user wrote; one unit makes them comparable at a glance).
func formatMemory(q resource.Quantity) string {
	gi := q.AsApproximateFloat64() / (1 << 30)
	if gi == math.Trunc(gi) {
		return fmt.Sprintf("%.0fGi", gi)
	}
	return fmt.Sprintf("%.1fGi", gi)
}
