package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Output formats of `get` (-o): "" is the default table.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
	OutputName  = "name"
)

// Outputs lists the -o values every printer of this package accepts.
var Outputs = []string{OutputWide, OutputJSON, OutputYAML, OutputName}

// PrintOptions are the kubectl printing flags: -o and --no-headers.
type PrintOptions struct {
	Output    string
	NoHeaders bool
}

// CheckOutput rejects an -o value outside allowed (default: Outputs),
// naming the accepted ones.
func CheckOutput(o string, allowed ...string) error {
	if len(allowed) == 0 {
		allowed = Outputs
	}
	if o == OutputTable || slices.Contains(allowed, o) {
		return nil
	}
	return fmt.Errorf("unknown output format %q: use %s", o, strings.Join(allowed, ", "))
}

// newTabWriter aligns columns like kubectl's printers.
func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
}

// Ready is the claim's READY column: True once initialized (Karpenter's Ready
// condition is Launched, Registered and Initialized together), False when one
// of them failed, Unknown while they are pending.
func Ready(nc *apis.NodeClaim) string {
	if nc.IsTrue(apis.ConditionLaunched) && nc.IsTrue(apis.ConditionRegistered) && nc.IsTrue(apis.ConditionInitialized) {
		return "True"
	}
	for _, t := range []string{apis.ConditionLaunched, apis.ConditionRegistered, apis.ConditionInitialized} {
		if c := nc.Condition(t); c != nil && c.Status == metav1.ConditionFalse {
			return "False"
		}
	}
	return "Unknown"
}

// Age formats the time since t as kubectl does (5m, 3h12m, 4d).
func Age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// FormatPrice prints $/hour with four decimals, "<unknown>" when no price is
// known (an instance type missing from both the price cache and the catalog).
func FormatPrice(v float64, ok bool) string {
	if !ok {
		return "<unknown>"
	}
	return fmt.Sprintf("$%.4f", v)
}

// WriteNodeClaims prints claims in one of the Output* formats. Table and wide
// have the columns of `kubectl get nodeclaims` (wide adds ID, NODEPOOL,
// NODECLASS, DRIFTED) and the node's price per hour; tombstones show their
// deletion age in READY as "Deleted". An empty table prints nothing: saying
// so is the caller's message for people (kubectl's "No resources found").
func WriteNodeClaims(w io.Writer, claims []Claim, o PrintOptions, prices Prices, now time.Time) error {
	items := make([]*apis.NodeClaim, 0, len(claims))
	names := make([]string, 0, len(claims))
	for _, c := range claims {
		items = append(items, NodeClaimObject(c))
		names = append(names, NodeClaimName(c.Name))
	}
	obj := list{APIVersion: "v1", Kind: "List", Items: items, Metadata: map[string]string{"resourceVersion": ""}}
	if done, err := writeData(w, o.Output, obj, names); done || len(claims) == 0 {
		return err
	}
	rows := make([][]string, 0, len(claims))
	for _, c := range claims {
		rows = append(rows, NodeClaimRow(c, o.Output, prices, now))
	}
	return WriteTable(w, o.header(NodeClaimHeader(o.Output)), rows)
}

// header is the table's header, nil with --no-headers.
func (o PrintOptions) header(columns []string) []string {
	if o.NoHeaders {
		return nil
	}
	return columns
}

// writeData prints the formats that are not tables: obj as JSON or YAML, or
// the names (-o name); done reports whether it handled o (an unknown format
// is handled by its error).
func writeData(w io.Writer, output string, obj any, names []string) (done bool, err error) {
	switch output {
	case OutputJSON, OutputYAML:
		return true, WriteObject(w, output, obj)
	case OutputName:
		for _, n := range names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return true, err
			}
		}
		return true, nil
	case OutputTable, OutputWide:
		return false, nil
	}
	return true, CheckOutput(output)
}

// WriteTable aligns rows under header (none when nil) as kubectl does.
func WriteTable(w io.Writer, header []string, rows [][]string) error {
	tw := newTabWriter(w)
	if header != nil {
		fmt.Fprintln(tw, strings.Join(header, "\t"))
	}
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// NodeClaimHeader is the header of the table (OutputTable) or wide table.
func NodeClaimHeader(output string) []string {
	cols := []string{"NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"}
	if output == OutputWide {
		cols = append(cols, "ID", "NODEPOOL", "NODECLASS", "DRIFTED")
	}
	return append(cols, "PRICE/H")
}

// NodeClaimRow is c's row under NodeClaimHeader(output).
func NodeClaimRow(c Claim, output string, prices Prices, now time.Time) []string {
	nc := c.NodeClaim
	ready := Ready(nc)
	switch {
	case c.Tombstoned():
		ready = "Deleted"
	case nc.Deleting():
		ready += ",Deleting"
	}
	row := []string{
		nc.Name,
		orNone(nc.Labels[catalog.LabelInstanceType]),
		orNone(nc.Labels[apis.CapacityTypeLabelKey]),
		orNone(nc.Labels[catalog.LabelTopologyZone]),
		orNone(nc.Status.NodeName),
		ready,
		Age(now, nc.CreationTimestamp.Time),
	}
	if output == OutputWide {
		drifted := ""
		if nc.IsTrue(apis.ConditionDrifted) {
			drifted = "True"
		}
		nodeClass := ""
		if nc.Spec.NodeClassRef != nil {
			nodeClass = nc.Spec.NodeClassRef.Name
		}
		row = append(row, orNone(nc.Status.ProviderID), orNone(nc.NodePoolName()), orNone(nodeClass), drifted)
	}
	price, ok := prices.ClaimPrice(nc)
	return append(row, FormatPrice(price, ok))
}

// NodeClaimName is the claim as `kubectl get -o name` prints it.
func NodeClaimName(name string) string { return "nodeclaim.karpenter.sh/" + name }

// NodeClaimObject is the one conversion of a claim to what `kubectl get -o
// json|yaml` prints: a karpenter.sh/v1 NodeClaim, so jq/yq scripts written
// for Karpenter keep working; a tombstone carries AnnotationDeletedAt.
func NodeClaimObject(c Claim) *apis.NodeClaim {
	nc := c.DeepCopy()
	nc.APIVersion, nc.Kind = "karpenter.sh/v1", "NodeClaim"
	if c.Tombstoned() {
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[AnnotationDeletedAt] = c.DeletedAt.UTC().Format(time.RFC3339)
	}
	return nc
}

// list is a Kubernetes v1 List, the shape of `kubectl get -o json|yaml`.
type list struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Items      []*apis.NodeClaim `json:"items"`
	Metadata   map[string]string `json:"metadata"`
}

// WriteObject prints v as indented JSON (OutputJSON) or as YAML.
func WriteObject(w io.Writer, output string, v any) error {
	data, err := json.MarshalIndent(v, "", "    ")
	if err != nil {
		return fmt.Errorf("encode as json: %w", err)
	}
	if output == OutputYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return fmt.Errorf("encode as yaml: %w", err)
		}
	} else {
		data = append(data, '\n')
	}
	_, err = w.Write(data)
	return err
}

// AnnotationDeletedAt marks a tombstone in json/yaml output with the time the
// claim was deleted (the record itself only has its deletionTimestamp, the
// time the deletion was decided).
const AnnotationDeletedAt = "nodewright.io/deleted-at"
