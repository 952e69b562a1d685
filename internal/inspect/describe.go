package inspect

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
)

// Event is one step of a claim's lifecycle, reconstructed from the record:
// its creation, every condition's last transition, the deletion decision and
// the tombstone. (nodewright keeps no Event objects of its own; the
// Kubernetes Events on pods and nodes expire after an hour, the record does
// not.)
type Event struct {
	Time   time.Time
	Type   string // Normal or Warning, as Kubernetes Events
	Reason string
	Detail string
}

// conditionOrder breaks ties between transitions stamped in the same second,
// in the order the workflow sets them.
var conditionOrder = map[string]int{
	apis.ConditionLaunched: 1, apis.ConditionRegistered: 2, apis.ConditionInitialized: 3,
	apis.ConditionConsolidatable: 4, apis.ConditionDrifted: 5, apis.ConditionDisruptionReason: 6,
	apis.ConditionDisrupting: 7, "Drained": 8, "VolumesDetached": 9, "InstanceTerminating": 10,
}

// Timeline returns the claim's lifecycle events, oldest first.
func Timeline(c Claim) []Event {
	nc := c.NodeClaim
	var ev []Event
	type keyed struct {
		Event
		order int
	}
	var ks []keyed
	if !nc.CreationTimestamp.IsZero() {
		detail := "nodeclaim created"
		if n := len(catalog.ClaimTypeOptions(nc)); n > 0 {
			detail = fmt.Sprintf("nodeclaim created with %d instance type options", n)
		}
		ks = append(ks, keyed{Event{nc.CreationTimestamp.Time, corev1.EventTypeNormal, "Created", detail}, 0})
	}
	for _, cond := range nc.Status.Conditions {
		e := Event{Time: cond.LastTransitionTime.Time, Type: corev1.EventTypeNormal}
		switch {
		case cond.Type == apis.ConditionDisruptionReason:
			e.Reason = "MarkedForDeletion"
			e.Detail = "reason " + cond.Reason
		case cond.Status == metav1.ConditionTrue:
			e.Reason = cond.Type
			if cond.Reason != "" && cond.Reason != cond.Type {
				e.Detail = cond.Reason
			}
		case cond.Status == metav1.ConditionFalse:
			e.Type = corev1.EventTypeWarning
			e.Reason = "Not" + cond.Type
			e.Detail = cond.Reason
		default:
			e.Reason = cond.Type + "Pending"
			e.Detail = cond.Reason
		}
		if cond.Message != "" {
			if e.Detail != "" {
				e.Detail += ": "
			}
			e.Detail += cond.Message
		}
		o, ok := conditionOrder[cond.Type]
		if !ok {
			o = 50
		}
		ks = append(ks, keyed{e, o})
	}
	if nc.DeletionTimestamp != nil && nc.Condition(apis.ConditionDisruptionReason) == nil {
		ks = append(ks, keyed{Event{nc.DeletionTimestamp.Time, corev1.EventTypeNormal, "MarkedForDeletion", "no reason recorded"}, 6})
	}
	if c.Tombstoned() {
		ks = append(ks, keyed{Event{c.DeletedAt, corev1.EventTypeNormal, "Deleted", "instance terminated and record tombstoned"}, 100})
	}
	sort.SliceStable(ks, func(i, j int) bool {
		if !ks[i].Time.Equal(ks[j].Time) {
			return ks[i].Time.Before(ks[j].Time)
		}
		return ks[i].order < ks[j].order
	})
	for _, k := range ks {
		ev = append(ev, k.Event)
	}
	return ev
}

// Status is a one-word summary of where the claim is in its lifecycle.
func Status(c Claim) string {
	nc := c.NodeClaim
	switch {
	case c.Tombstoned():
		return "Deleted"
	case nc.Deleting():
		return "Deleting"
	case Ready(nc) == "True":
		return "Ready"
	case nc.IsTrue(apis.ConditionRegistered):
		return "Registered"
	case nc.IsTrue(apis.ConditionLaunched):
		return "Launched"
	case Ready(nc) == "False":
		return "Failed"
	}
	return "Pending"
}

func stamp(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return fmt.Sprintf("%s (%s ago)", t.UTC().Format(time.RFC3339), Age(now, t))
}

// WriteDescribe prints one claim the way `kubectl describe nodeclaim` lays it
// out: identity, where it runs, why it was disrupted, what it was asked for,
// its conditions with timestamps and its lifecycle events.
func WriteDescribe(w io.Writer, c Claim, prices Prices, now time.Time) error {
	nc := c.NodeClaim
	if err := writeIdentity(w, nc, Status(c), prices, now); err != nil {
		return err
	}
	if nc.Deleting() || c.Tombstoned() {
		if err := writeDisruption(w, c, now); err != nil {
			return err
		}
	}
	writeMap(w, "Labels", nc.Labels)
	writeMap(w, "Annotations", nc.Annotations)
	writeRequirements(w, nc.Spec.Requirements)
	writeResources(w, "Resource Requests", nc.Spec.Resources.Requests)
	writeResources(w, "Capacity", nc.Status.Capacity)
	writeResources(w, "Allocatable", nc.Status.Allocatable)
	writeTaints(w, "Taints", nc.Spec.Taints)
	writeTaints(w, "Startup Taints", nc.Spec.StartupTaints)
	if err := writeConditions(w, nc.Status.Conditions); err != nil {
		return err
	}
	return writeEvents(w, Timeline(c), now)
}

// writeIdentity prints the key/value block at the top: what the claim is,
// where it runs and what it costs.
func writeIdentity(w io.Writer, nc *apis.NodeClaim, status string, prices Prices, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	p := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	nodeClass := ""
	if nc.Spec.NodeClassRef != nil {
		nodeClass = nc.Spec.NodeClassRef.Name
	}
	p("Name", nc.Name)
	p("NodePool", orNone(nc.NodePoolName()))
	p("NodeClass", orNone(nodeClass))
	p("Status", status)
	p("Created", stamp(now, nc.CreationTimestamp.Time))
	p("Instance Type", orNone(nc.Labels[catalog.LabelInstanceType]))
	p("Capacity Type", orNone(nc.Labels[apis.CapacityTypeLabelKey]))
	p("Zone", orNone(nc.Labels[catalog.LabelTopologyZone]))
	p("Instance ID", orNone(nc.Status.InstanceID))
	p("Provider ID", orNone(nc.Status.ProviderID))
	p("Image ID", orNone(nc.Status.ImageID))
	p("Node", orNone(nc.Status.NodeName))
	price, ok := prices.ClaimPrice(nc)
	p("Price", FormatPrice(price, ok)+"/h")
	if nc.Spec.ExpireAfter.Duration != nil {
		p("Expire After", nc.Spec.ExpireAfter.Duration.String())
	}
	if nc.Spec.TerminationGracePeriod != nil {
		p("Termination Grace Period", nc.Spec.TerminationGracePeriod.Duration.String())
	}
	return tw.Flush()
}

// writeDisruption prints why and when a deleting (or deleted) claim was let go.
func writeDisruption(w io.Writer, c Claim, now time.Time) error {
	nc := c.NodeClaim
	fmt.Fprintln(w, "Disruption:")
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	reason, message := "<none recorded>", ""
	if cond := nc.Condition(apis.ConditionDisruptionReason); cond != nil {
		reason, message = cond.Reason, cond.Message
	}
	fmt.Fprintf(tw, "  Reason:\t%s\n", reason)
	if message != "" {
		fmt.Fprintf(tw, "  Message:\t%s\n", message)
	}
	if nc.DeletionTimestamp != nil {
		fmt.Fprintf(tw, "  Decided:\t%s\n", stamp(now, nc.DeletionTimestamp.Time))
	}
	if d, ok := nc.TerminationDeadline(); ok {
		fmt.Fprintf(tw, "  Drain Deadline:\t%s\n", d.UTC().Format(time.RFC3339))
	}
	if c.Tombstoned() {
		fmt.Fprintf(tw, "  Deleted:\t%s\n", stamp(now, c.DeletedAt))
	}
	return tw.Flush()
}

// writeRequirements prints one line per requirement, long value lists cut
// to their first eight.
func writeRequirements(w io.Writer, reqs []apis.NodeSelectorRequirementWithMinValues) {
	fmt.Fprintln(w, "Requirements:")
	if len(reqs) == 0 {
		fmt.Fprintln(w, "  <none>")
	}
	for _, r := range reqs {
		vals := strings.Join(r.Values, ", ")
		if len(r.Values) > 8 {
			vals = strings.Join(r.Values[:8], ", ") + fmt.Sprintf(", ... (%d in all)", len(r.Values))
		}
		line := fmt.Sprintf("  %s %s", r.Key, r.Operator)
		if vals != "" {
			line += " [" + vals + "]"
		}
		if r.MinValues != nil {
			line += fmt.Sprintf(" minValues=%d", *r.MinValues)
		}
		fmt.Fprintln(w, line)
	}
}

// writeConditions prints the conditions as a table in lifecycle order.
func writeConditions(w io.Writer, conditions []metav1.Condition) error {
	fmt.Fprintln(w, "Conditions:")
	if len(conditions) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	tw := newTable(w, "Type", "Status", "LastTransitionTime", "Reason", "Message")
	conds := append([]metav1.Condition(nil), conditions...)
	sort.SliceStable(conds, func(i, j int) bool { return conditionRank(conds[i].Type) < conditionRank(conds[j].Type) })
	for _, cond := range conds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", cond.Type, cond.Status,
			cond.LastTransitionTime.UTC().Format(time.RFC3339), orNone(cond.Reason), cond.Message)
	}
	return tw.Flush()
}

// newTable starts an indented table: the column names, then a dashed rule
// under each.
func newTable(w io.Writer, columns ...string) *tabwriter.Writer {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	rules := make([]string, len(columns))
	for i, c := range columns {
		rules[i] = strings.Repeat("-", len(c))
	}
	fmt.Fprintln(tw, "  "+strings.Join(columns, "\t"))
	fmt.Fprintln(tw, "  "+strings.Join(rules, "\t"))
	return tw
}

// writeEvents prints the claim's lifecycle events as a table.
func writeEvents(w io.Writer, events []Event, now time.Time) error {
	fmt.Fprintln(w, "Events:")
	if len(events) == 0 {
		fmt.Fprintln(w, "  <none>")
		return nil
	}
	tw := newTable(w, "Type", "Reason", "Age", "Time", "Detail")
	for _, e := range events {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", e.Type, e.Reason, Age(now, e.Time), e.Time.UTC().Format(time.RFC3339), e.Detail)
	}
	return tw.Flush()
}

func conditionRank(t string) int {
	if o, ok := conditionOrder[t]; ok {
		return o
	}
	return 50
}

func writeMap(w io.Writer, title string, m map[string]string) {
	if len(m) == 0 {
		fmt.Fprintf(w, "%s: <none>\n", title)
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "%s:\n", title)
	for _, k := range keys {
		fmt.Fprintf(w, "  %s=%s\n", k, m[k])
	}
}

func writeResources(w io.Writer, title string, rl corev1.ResourceList) {
	if len(rl) == 0 {
		fmt.Fprintf(w, "%s: <none>\n", title)
		return
	}
	keys := make([]string, 0, len(rl))
	for k := range rl {
		keys = append(keys, string(k))
	}
	sort.Strings(keys)
	fmt.Fprintf(w, "%s:\n", title)
	for _, k := range keys {
		q := rl[corev1.ResourceName(k)]
		fmt.Fprintf(w, "  %s: %s\n", k, q.String())
	}
}

func writeTaints(w io.Writer, title string, ts []corev1.Taint) {
	if len(ts) == 0 {
		return
	}
	fmt.Fprintf(w, "%s:\n", title)
	for _, t := range ts {
		fmt.Fprintf(w, "  %s\n", t.ToString())
	}
}
