package inspect

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Output formats of `get`.
const (
	OutputTable = ""
	OutputWide  = "wide"
	OutputJSON  = "json"
	OutputYAML  = "yaml"
)

// CheckOutput rejects an unknown -o value, naming the accepted ones.
func CheckOutput(o string) error {
	switch o {
	case OutputTable, OutputWide, OutputJSON, OutputYAML:
		return nil
	}
	return fmt.Errorf("unknown output format %q: use wide, json or yaml", o)
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
// deletion age in READY as "Deleted".
func WriteNodeClaims(w io.Writer, claims []Claim, output string, prices Prices, now time.Time) error {
	switch output {
	case OutputJSON, OutputYAML:
		return writeList(w, claims, output)
	case OutputTable, OutputWide:
	default:
		return CheckOutput(output)
	}
	if len(claims) == 0 {
		_, err := fmt.Fprintln(w, "No nodeclaims found.")
		return err
	}
	tw := newTabWriter(w)
	cols := []string{"NAME", "TYPE", "CAPACITY", "ZONE", "NODE", "READY", "AGE"}
	if output == OutputWide {
		cols = append(cols, "ID", "NODEPOOL", "NODECLASS", "DRIFTED")
	}
	cols = append(cols, "PRICE/H")
	fmt.Fprintln(tw, strings.Join(cols, "\t"))
	for _, c := range claims {
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
		row = append(row, FormatPrice(price, ok))
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
}

// writeList prints claims as a Kubernetes List of karpenter.sh/v1 NodeClaims,
// the shape `kubectl get -o json|yaml` prints, so jq/yq scripts written for
// Karpenter keep working.
func writeList(w io.Writer, claims []Claim, output string) error {
	items := make([]*apis.NodeClaim, 0, len(claims))
	for _, c := range claims {
		nc := c.DeepCopy()
		nc.APIVersion, nc.Kind = "karpenter.sh/v1", "NodeClaim"
		if c.Tombstoned() {
			if nc.Annotations == nil {
				nc.Annotations = map[string]string{}
			}
			nc.Annotations[AnnotationDeletedAt] = c.DeletedAt.UTC().Format(time.RFC3339)
		}
		items = append(items, nc)
	}
	list := struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []*apis.NodeClaim `json:"items"`
		Metadata   map[string]string `json:"metadata"`
	}{"v1", "List", items, map[string]string{"resourceVersion": ""}}
	data, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		return fmt.Errorf("encode nodeclaims: %w", err)
	}
	if output == OutputYAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return fmt.Errorf("encode nodeclaims as yaml: %w", err)
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
