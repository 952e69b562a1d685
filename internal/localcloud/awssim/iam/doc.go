// Package iam evaluates AWS requests against IAM identity policies the way
// AWS documents it, for the local cloud: a call is allowed only when a
// statement of the caller's policies allows it and none denies it.
//
// It holds three things and nothing else:
//   - policy documents and their evaluation (explicit Deny > Allow >
//     implicit deny; Action/NotAction, Resource/NotResource with wildcards;
//     the condition operators with IfExists and the ForAllValues /
//     ForAnyValue set qualifiers);
//   - the roles of a synthesized CloudFormation template (inline policies,
//     AWS::IAM::Policy and customer managed policies attached to them),
//     with the template's intrinsic functions resolved against the local
//     cloud's own resources;
//   - the Service Authorization Reference rows of the actions nodewright
//     calls (actions.go), which say against which resources, and with
//     which condition keys, each action is authorized.
//
// Why: nodewright cannot run against a real account in its tests. If the
// simulator let every call through, a policy that denies a real launch
// would pass every test; evaluating the policy that `cdk synth` produced
// makes the local runs prove the deployable artifact.
//
// The package is pure: no network, no clock, no global mutable state.
package iam
