package localrun

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Timeline prints what a person watching the system wants to follow, each
// line stamped with the seconds since it started. A nil Timeline prints
// nothing.
type Timeline struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

// NewTimeline stamps lines written to out with the seconds since start.
func NewTimeline(out io.Writer, start time.Time) *Timeline {
	return &Timeline{out: out, start: start}
}

// Printf prints one stamped line.
func (t *Timeline) Printf(format string, args ...any) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, "[%6.1fs] %s\n", time.Since(t.start).Seconds(), fmt.Sprintf(format, args...))
}

// logTap receives a function's JSON log and EMF lines (what CloudWatch Logs
// would get), forwards them to the raw log writer and turns the records a
// person cares about into timeline lines. The timeline therefore shows what
// the real handlers did, not what the demo guesses they did.
type logTap struct {
	fn  string
	tl  *Timeline
	raw io.Writer

	mu  sync.Mutex
	buf []byte
}

func (l *logTap) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.raw != nil {
		_, _ = l.raw.Write(p)
	}
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := l.buf[:i]
		var rec map[string]any
		if json.Unmarshal(line, &rec) == nil {
			if s := l.render(rec); s != "" {
				l.tl.Printf("%-12s %s", l.fn, s)
			}
		}
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func str(rec map[string]any, k string) string {
	switch v := rec[k].(type) {
	case string:
		return v
	case float64:
		return fmt.Sprint(v)
	case bool:
		return fmt.Sprint(v)
	case nil:
		return ""
	default:
		b, _ := json.Marshal(v)
		return string(b)
	}
}

func num(rec map[string]any, k string) float64 {
	f, _ := rec[k].(float64)
	return f
}

// render picks and formats the records worth a timeline line.
func (l *logTap) render(rec map[string]any) string {
	msg := str(rec, "msg")
	claim := str(rec, "nodeclaim")
	for _, r := range []func(msg, claim string, rec map[string]any) (string, bool){renderProvisioning, renderNodeLifecycle, renderDisruption} {
		if s, ok := r(msg, claim, rec); ok {
			return s
		}
	}
	return renderProblem(msg, claim, rec)
}

// renderProvisioning: the webhook's nudges and the provisioner's runs.
func renderProvisioning(msg, claim string, rec map[string]any) (string, bool) {
	switch msg {
	case "nudged provisioner":
		s := fmt.Sprintf("AdmissionReview pods/status UPDATE for %s (%s) -> nudge on the provision queue", str(rec, "pod"), str(rec, "reason"))
		if n := num(rec, "coalesced"); n > 0 {
			s += fmt.Sprintf(" (%d earlier calls coalesced)", int(n))
		}
		return s, true
	case "nodeclaim planned":
		return fmt.Sprintf("NodeClaim %s planned: %s %s %s $%.4f/h for %d pods (%d instance types allowed)",
			claim, str(rec, "instance-type"), str(rec, "zone"), str(rec, "capacity-type"), num(rec, "price"), int(num(rec, "pods")), int(num(rec, "options"))), true
	case "launched nodeclaim":
		return fmt.Sprintf("CreateFleet launched %s (%s %s %s) for NodeClaim %s", str(rec, "instance-id"), str(rec, "instance-type"),
			str(rec, "zone"), str(rec, "capacity-type"), claim), true
	case "provisioner run":
		if num(rec, "pending") == 0 && num(rec, "created") == 0 && num(rec, "resumed") == 0 {
			return "", true // an idle schedule tick
		}
		if num(rec, "created") == 0 && num(rec, "launched") == 0 && num(rec, "resumed") == 0 && num(rec, "unschedulable") == 0 &&
			num(rec, "nominated") == num(rec, "pending") {
			return fmt.Sprintf("run %s (%s): %d pending pods all fit in-flight NodeClaims; nothing to launch (took %s)",
				str(rec, "run"), str(rec, "trigger"), int(num(rec, "pending")), str(rec, "duration")), true
		}
		return fmt.Sprintf("run %s (%s): %d pending, batch %s, %d claims created, %d launched, %d pods nominated, %d unschedulable, solve %s, took %s",
			str(rec, "run"), str(rec, "trigger"), int(num(rec, "pending")), str(rec, "batch"), int(num(rec, "created")), int(num(rec, "launched")),
			int(num(rec, "nominated")), int(num(rec, "unschedulable")), str(rec, "solve-time"), str(rec, "duration")), true
	case "volume provisioned":
		return fmt.Sprintf("PersistentVolume %s for claim %s in %s", str(rec, "volume"), str(rec, "claim"), str(rec, "zone")), true
	case "provisioner run skipped: nudges predate the last completed run":
		return "", true // expected: the nudge's pods were handled by the run that just ended
	}
	return "", false
}

// renderNodeLifecycle: registration, emptiness, drain and termination.
func renderNodeLifecycle(msg, claim string, rec map[string]any) (string, bool) {
	switch msg {
	case "node registered":
		return fmt.Sprintf("node %s registered for NodeClaim %s (%s after launch)", str(rec, "node"), claim, str(rec, "after-launch")), true
	case "node initialized":
		return fmt.Sprintf("node %s initialized (Ready) for NodeClaim %s (%s after launch)", str(rec, "node"), claim, str(rec, "after-launch")), true
	case "empty node: deleting":
		return fmt.Sprintf("node %s empty for consolidateAfter %s: NodeClaim %s marked for deletion", str(rec, "node"), str(rec, "consolidate-after"), claim), true
	case "node tainted for termination":
		return fmt.Sprintf("node %s tainted %s, draining", str(rec, "node"), str(rec, "taint")), true
	case "pod evicted":
		return fmt.Sprintf("evicted %s from %s", str(rec, "pod"), str(rec, "node")), true
	case "instance terminating":
		return fmt.Sprintf("TerminateInstances %s (NodeClaim %s)", str(rec, "instance-id"), claim), true
	case "node deleted":
		return fmt.Sprintf("node %s deleted", str(rec, "node")), true
	case "nodeclaim terminated":
		return fmt.Sprintf("NodeClaim %s terminated (%s after the deletion mark)", claim, str(rec, "since-mark")), true
	}
	return "", false
}

// renderDisruption: disruption decisions, offerings, unschedulable pods.
func renderDisruption(msg, claim string, rec map[string]any) (string, bool) {
	switch msg {
	case "disruption decided; validating before acting":
		return fmt.Sprintf("decided %s (%s): %s; validating", str(rec, "method"), str(rec, "action"), str(rec, "message")), true
	case "nodeclaim marked for deletion":
		s := fmt.Sprintf("NodeClaim %s marked for deletion (%s", claim, str(rec, "reason"))
		if m := str(rec, "method"); m != "" {
			s += ", " + m
		}
		return s + ")", true
	case "spot offering marked unavailable":
		return fmt.Sprintf("spot offering %s marked unavailable for %s", str(rec, "offering"), str(rec, "ttl")), true
	case "pods unschedulable":
		return fmt.Sprintf("%d pods unschedulable: %s (e.g. %s)", int(num(rec, "count")), str(rec, "reason"), str(rec, "pod")), true
	}
	return "", false
}

// renderProblem turns any other ERROR or WARN record into a line.
func renderProblem(msg, claim string, rec map[string]any) string {
	if lvl := str(rec, "level"); lvl == "ERROR" || lvl == "WARN" {
		if msg == "" {
			return ""
		}
		s := lvl + " " + msg
		if e := str(rec, "error"); e != "" {
			s += ": " + e
		}
		if claim != "" {
			s += " (nodeclaim " + claim + ")"
		}
		return s
	}
	return ""
}
