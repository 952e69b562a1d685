package disruption

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
)

// Methods, in the order they are tried (the first that acts wins).
const (
	MethodEmptiness  = "emptiness"
	MethodDrift      = "drift"
	MethodMultiNode  = "multi-node-consolidation"
	MethodSingleNode = "single-node-consolidation"
	MethodRepack     = "repack"
)

// Actions a command takes.
const (
	ActionDelete  = "delete"
	ActionReplace = "replace"
)

// Phases of a persisted command.
const (
	PhaseValidating = "Validating"
	PhaseReplacing  = "Replacing"
)

// Node event reasons (Karpenter's).
const (
	ReasonDisrupting = "Disrupting"
	ReasonBlocked    = "DisruptionBlocked"
	ReasonUnconsol   = "Unconsolidatable"
)

// CommandNode is one node a command disrupts, as decided.
type CommandNode struct {
	Claim        string  `json:"claim"`
	Node         string  `json:"node"`
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Price        float64 `json:"price"`
}

// Replacement is one new node a command needs.
type Replacement struct {
	NodePool     string  `json:"nodePool"`
	InstanceType string  `json:"instanceType"`
	CapacityType string  `json:"capacityType"`
	Zone         string  `json:"zone"`
	Price        float64 `json:"price"`
}

// Command is one disruption decision. It is persisted in the store between
// invocations: decided, then validated after Settings.ValidationDelay, then
// (for replacements) carried until the replacements are initialized.
type Command struct {
	Method       string                `json:"method"`
	Reason       apis.DisruptionReason `json:"reason"`
	Detail       string                `json:"detail,omitempty"`
	Candidates   []CommandNode         `json:"candidates"`
	Replacements []Replacement         `json:"replacements,omitempty"`
	Message      string                `json:"message"`

	Phase         string    `json:"phase"`
	DecidedAt     time.Time `json:"decidedAt"`
	ValidateAfter time.Time `json:"validateAfter"`
	// ReplacingSince is when the candidates were marked disrupting and the
	// replacements requested.
	ReplacingSince time.Time `json:"replacingSince,omitzero"`
	// ReplacementClaims are the claims the provisioning passes launched
	// while this command waited (for people and the flip-flop history).
	ReplacementClaims []string `json:"replacementClaims,omitempty"`
}

// Action is delete or replace.
func (c *Command) Action() string {
	if len(c.Replacements) == 0 {
		return ActionDelete
	}
	return ActionReplace
}

// Cost is what the candidates cost per hour; NewCost what the
// replacements cost.
func (c *Command) Cost() float64 {
	s := 0.0
	for _, n := range c.Candidates {
		s += n.Price
	}
	return s
}

// NewCost is the replacements' price per hour.
func (c *Command) NewCost() float64 {
	s := 0.0
	for _, r := range c.Replacements {
		s += r.Price
	}
	return s
}

// Savings is the hourly saving of the command.
func (c *Command) Savings() float64 { return c.Cost() - c.NewCost() }

// ClaimNames are the candidates' claims.
func (c *Command) ClaimNames() []string {
	out := make([]string, len(c.Candidates))
	for i, n := range c.Candidates {
		out[i] = n.Claim
	}
	return out
}

// NodeNames are the candidates' nodes.
func (c *Command) NodeNames() []string {
	out := make([]string, len(c.Candidates))
	for i, n := range c.Candidates {
		out[i] = n.Node
	}
	return out
}

func newCommand(method string, reason apis.DisruptionReason, detail string, cands []*Candidate, sim Simulation, now time.Time) *Command {
	cmd := &Command{Method: method, Reason: reason, Detail: detail, Phase: PhaseValidating, DecidedAt: now}
	for _, c := range cands {
		cmd.Candidates = append(cmd.Candidates, CommandNode{
			Claim: c.Claim.Name, Node: c.Name(), NodePool: c.NodePool.Name,
			InstanceType: c.InstanceType, CapacityType: c.CapacityType, Price: c.Price,
		})
	}
	for _, r := range sim.Replacements {
		cmd.Replacements = append(cmd.Replacements, Replacement{
			NodePool: r.NodePool, InstanceType: r.InstanceType, CapacityType: r.CapacityType, Zone: r.Zone, Price: r.PricePerHour,
		})
	}
	cmd.Message = cmd.describe()
	return cmd
}

// describe explains the command for people, e.g. "Consolidating: replace 3
// nodes (m5.xlarge x3, $0.576/h) with 1 m6i.2xlarge ($0.384/h), saves
// $0.192/h".
func (c *Command) describe() string {
	var verb string
	switch c.Method {
	case MethodEmptiness:
		verb = "Emptiness"
	case MethodDrift:
		verb = "Drifted"
		if c.Detail != "" {
			verb += " (" + c.Detail + ")"
		}
	case MethodRepack:
		verb = "Repacking"
	default:
		verb = "Consolidating"
	}
	var types []string
	for _, n := range c.Candidates {
		types = append(types, n.InstanceType)
	}
	old := fmt.Sprintf("%d %s (%s, $%.3f/h)", len(c.Candidates), plural(len(c.Candidates), "node", "nodes"), typeSummary(types), c.Cost())
	if c.Action() == ActionDelete {
		return fmt.Sprintf("%s: delete %s, saves $%.3f/h", verb, old, c.Savings())
	}
	var newTypes []string
	for _, r := range c.Replacements {
		newTypes = append(newTypes, r.InstanceType)
	}
	msg := fmt.Sprintf("%s: replace %s with %d %s ($%.3f/h)", verb, old, len(c.Replacements), typeSummary(newTypes), c.NewCost())
	if s := c.Savings(); s > 0.0005 {
		msg += fmt.Sprintf(", saves $%.3f/h", s)
	}
	return msg
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// typeSummary renders types as "m5.xlarge x3, m5.large".
func typeSummary(types []string) string {
	count := map[string]int{}
	for _, t := range types {
		count[t]++
	}
	names := make([]string, 0, len(count))
	for t := range count {
		names = append(names, t)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, t := range names {
		if count[t] > 1 {
			parts[i] = fmt.Sprintf("%s x%d", t, count[t])
		} else {
			parts[i] = t
		}
	}
	return strings.Join(parts, ", ")
}

// HistoryEntry is one executed replacement, kept for a while so the same
// nodes are not flip-flopped between shapes.
type HistoryEntry struct {
	At time.Time `json:"at"`
	// FromTypes are the instance types that were replaced.
	FromTypes []string `json:"fromTypes"`
	// Replacements are the claims that replaced them.
	Replacements []string `json:"replacements"`
}
