package iam

import (
	"slices"
	"strings"
)

// Simulation is what iam:SimulatePrincipalPolicy answers for one action on
// one resource (its EvaluationResult): the decision, the statements that
// made it and the condition keys the policies ask for that the request's
// context did not give.
type Simulation struct {
	Decision Decision
	// Missing are condition keys of the statements that apply to the
	// action and resource but are absent from the context, sorted
	// (MissingContextValues: "A list of context keys that are required by
	// the included input policies but that were not provided by one of the
	// input parameters", IAM API reference, EvaluationResult).
	Missing []string
}

// Simulate evaluates req under policies as SimulatePrincipalPolicy does: the
// same logic as a real request (Evaluate), with only the context keys the
// caller gave (the simulator adds none of the request's own global keys:
// "If a context key is not supplied, the simulation treats it as missing",
// IAM user guide, "Testing IAM policies with the IAM policy simulator").
func Simulate(policies []*Policy, req Request) Simulation {
	sim := Simulation{Decision: Evaluate(policies, req)}
	missing := map[string]string{} // lower-case key -> as written
	for _, p := range policies {
		for i := range p.Statements {
			st := &p.Statements[i]
			unconditional := *st
			unconditional.Conditions = nil
			if !unconditional.Matches(req) {
				continue
			}
			for _, c := range st.Conditions {
				if _, ok := req.Context.Get(c.Key); !ok {
					missing[strings.ToLower(c.Key)] = c.Key
				}
			}
		}
	}
	for _, k := range missing {
		sim.Missing = append(sim.Missing, k)
	}
	slices.Sort(sim.Missing)
	return sim
}

// PolicyName is the policy a statement ID (Statement.ID) belongs to: the
// SourcePolicyId SimulatePrincipalPolicy names in MatchedStatements.
func PolicyName(statementID string) string {
	name, _, _ := strings.Cut(statementID, "#")
	return name
}
