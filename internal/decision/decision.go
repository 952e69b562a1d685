// Package decision defines what shadow mode records in the table — the
// NodeClaims a provisioning pass would launch for pending pods, and what a
// pass over the running fleet would consolidate and why it would not — and
// turns a window of those records into `nodewright report`'s summary.
package decision

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nodewright/nodewright/internal/store"
)

// Record kinds (store.Decision.Kind).
const (
	KindLaunch = "launch"
	KindFleet  = "fleet"
)

// Launch is what one provisioning pass would have launched.
type Launch struct {
	At       time.Time `json:"at"`
	Function string    `json:"function"`
	// DecisionSeconds is how long the pass took from its cluster snapshot
	// to its first launch (solve and claim records): the time nodewright
	// adds after its batching window.
	DecisionSeconds float64 `json:"decisionSeconds"`
	Claims          []Claim `json:"claims"`
	// Pending are the pods the pass saw pending, with their age then.
	Pending []Pod `json:"pending,omitempty"`
}

// Claim is one NodeClaim a pass would have launched.
type Claim struct {
	Node
	// Pods are the pods the pass would have put on it (namespace/name).
	Pods []string `json:"pods,omitempty"`
}

// Pod is a pod with how long it had been pending, or took to schedule.
type Pod struct {
	Pod     string    `json:"pod"`
	Created time.Time `json:"created"`
	Seconds float64   `json:"seconds"`
}

// Fleet is one pass over the running fleet: every node (nodewright's or
// not) priced, and the consolidation nodewright would do.
type Fleet struct {
	At           time.Time `json:"at"`
	Nodes        int       `json:"nodes"`
	ForeignNodes int       `json:"foreignNodes"`
	// CostPerHour is what the fleet's nodes cost, by their offering.
	CostPerHour float64 `json:"costPerHour"`
	// PlanCostPerHour is what nodewright's from-scratch plan for the same
	// pods would cost (0 when it could not plan them all).
	PlanCostPerHour float64 `json:"planCostPerHour"`
	// Opportunity is the consolidation nodewright would do now (nil: none).
	Opportunity *Opportunity `json:"opportunity,omitempty"`
	// Blocked are nodes it would not disrupt, and why (PDBs,
	// do-not-disrupt, budgets).
	Blocked []Blocked `json:"blocked,omitempty"`
	// Scheduled are the pods that got a node since the previous pass, with
	// how long they waited (whoever launched their node).
	Scheduled []Pod `json:"scheduled,omitempty"`
	// NotHonoured are the configuration's warnings: settings nodewright
	// reads but does not act on as Karpenter would.
	NotHonoured []string `json:"notHonoured,omitempty"`
}

// Opportunity is one consolidation command nodewright would run.
type Opportunity struct {
	Method       string  `json:"method"`
	Action       string  `json:"action"`
	Message      string  `json:"message"`
	Nodes        []Node  `json:"nodes"`
	Replacements []Node  `json:"replacements,omitempty"`
	SavingsPerHr float64 `json:"savingsPerHour"`
}

// Node is a node a command removes or launches, or a claim's node.
type Node struct {
	Name         string  `json:"name,omitempty"`
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	Zone         string  `json:"zone,omitempty"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
	// Owner is who launched it: "nodewright", "karpenter", or "other"
	// (Cluster Autoscaler, managed node groups, people).
	Owner string `json:"owner,omitempty"`
}

// Blocked is a node disruption would not touch, and why.
type Blocked struct {
	Node   string `json:"node"`
	Reason string `json:"reason"`
}

// Writer is what recording needs of the store (*store.Store).
type Writer interface {
	PutDecision(ctx context.Context, d store.Decision) error
}

// Put writes one record of kind (KindLaunch, KindFleet) made at at.
func Put(ctx context.Context, w Writer, kind, id string, at time.Time, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("record %s decision: %w", kind, err)
	}
	return w.PutDecision(ctx, store.Decision{At: at, Kind: kind, ID: id, Body: b})
}

// Records are a window's decoded records.
type Records struct {
	Launches []Launch
	Fleets   []Fleet
}

// Decode decodes store records; records of unknown kinds are skipped (a
// newer version may write kinds this one does not read).
func Decode(ds []store.Decision) (Records, error) {
	var r Records
	for _, d := range ds {
		var err error
		switch d.Kind {
		case KindLaunch:
			var l Launch
			err = json.Unmarshal(d.Body, &l)
			r.Launches = append(r.Launches, l)
		case KindFleet:
			var f Fleet
			err = json.Unmarshal(d.Body, &f)
			r.Fleets = append(r.Fleets, f)
		}
		if err != nil {
			return r, fmt.Errorf("decode %s decision of %s: %w", d.Kind, d.At.Format(time.RFC3339), err)
		}
	}
	return r, nil
}
