package iam

// Target is one thing a call is authorized against: an action on one
// resource, with what the request context knows about that resource. A
// simulated service lists its targets; Authorizer turns each into a Request
// with the condition keys the action's reference row lists for the type.
type Target struct {
	Action string // "ec2:CreateFleet", or the implicit "ec2:CreateTags" / "iam:PassRole"
	// Type is the reference's resource type ("instance", "table"); empty
	// for actions without resource-level permissions (ARN "*").
	Type string
	ARN  string
	// Tags are the resource's own tags (aws:ResourceTag/*, and the
	// service's own ResourceTag key where the reference lists one).
	Tags map[string]string
	// RequestTags are the tags the request puts on it (aws:RequestTag/*,
	// aws:TagKeys); nil when it tags nothing.
	RequestTags map[string]string
	// Creating marks a resource the call creates (its ARN holds "*" for
	// the ID not yet known).
	Creating bool
	// Keys are further condition keys of this target (ec2:CreateAction,
	// iam:PassedToService), lower-case.
	Keys Context
}
