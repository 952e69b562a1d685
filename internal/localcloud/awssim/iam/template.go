package iam

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Template is a synthesized CloudFormation template, read for its IAM
// roles and the resources their policies name.
type Template struct {
	resources map[string]cfnResource
}

type cfnResource struct {
	Type       string         `json:"Type"`
	Properties map[string]any `json:"Properties"`
}

// ParseTemplate reads a template (cdk.out/<stack>.template.json).
func ParseTemplate(data []byte) (*Template, error) {
	var doc struct {
		Resources map[string]cfnResource `json:"Resources"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("read template: %w", err)
	}
	if len(doc.Resources) == 0 {
		return nil, fmt.Errorf("read template: no Resources")
	}
	return &Template{resources: doc.Resources}, nil
}

// Binding resolves a template against one deployment in the local cloud:
// the pseudo parameters, the physical resources the template's logical IDs
// stand for, and literal text to replace (the cluster name the template was
// synthesized for, by this deployment's).
type Binding struct {
	Partition, Region, Account, StackName string
	// Physical maps a construct ID (the logical ID without the hash CDK
	// appends: "Table", "WorkQueue", "NodeRole") to the physical name of
	// the resource, or to its ARN. A resource missing here resolves to a
	// name no real resource has, so whatever a policy grants on it is
	// granted on nothing.
	Physical map[string]string
	// Replace maps literal text in the template to this deployment's.
	Replace map[string]string
}

var cdkHash = regexp.MustCompile(`[0-9A-F]{8}$`)

// ConstructID strips CDK's 8-hex-digit hash from a logical ID.
func ConstructID(logicalID string) string {
	if len(logicalID) > 8 && cdkHash.MatchString(logicalID) {
		return logicalID[:len(logicalID)-8]
	}
	return logicalID
}

// Roles lists the construct IDs of the template's AWS::IAM::Role resources.
func (t *Template) Roles() []string {
	var out []string
	for id, r := range t.resources {
		if r.Type == "AWS::IAM::Role" {
			out = append(out, ConstructID(id))
		}
	}
	sort.Strings(out)
	return out
}

// logicalID finds a resource by its construct ID.
func (t *Template) logicalID(construct string) (string, bool) {
	for id := range t.resources {
		if ConstructID(id) == construct {
			return id, true
		}
	}
	return "", false
}

// RoleARN is the ARN of a role of the template under b.
func (t *Template) RoleARN(construct string, b Binding) (string, error) {
	id, ok := t.logicalID(construct)
	if !ok {
		return "", fmt.Errorf("template has no role %s", construct)
	}
	r := resolver{t: t, b: b}
	return r.attr(id, "Arn")
}

// InstanceProfiles maps the ARN of every instance profile the template
// creates to the ARN of the role it holds, under b: what a deployment tells
// the simulator, which has no IAM service, so that a launch with the
// profile is authorized as passing that role. The template names a role in
// a profile by name, so a role with a path maps to its ARN without it.
func (t *Template) InstanceProfiles(b Binding) (map[string]string, error) {
	r := resolver{t: t, b: b}
	out := map[string]string{}
	for id, res := range t.resources {
		if res.Type != "AWS::IAM::InstanceProfile" {
			continue
		}
		profile, err := r.attr(id, "Arn")
		if name, ok := res.Properties["InstanceProfileName"]; ok && err == nil {
			var v any
			v, err = r.resolve(name)
			profile = fmt.Sprintf("arn:%s:iam::%s:instance-profile/%v", b.Partition, b.Account, v)
		}
		if err != nil {
			return nil, fmt.Errorf("instance profile %s: %w", id, err)
		}
		roles, err := r.stringList(res.Properties["Roles"])
		if err != nil {
			return nil, fmt.Errorf("instance profile %s: %w", id, err)
		}
		if len(roles) != 1 {
			return nil, fmt.Errorf("instance profile %s: want one role, have %v", id, roles)
		}
		out[profile] = fmt.Sprintf("arn:%s:iam::%s:role/%s", b.Partition, b.Account, roles[0])
	}
	return out, nil
}

// RolePolicies returns every identity policy of a role: its inline
// policies, the AWS::IAM::Policy and AWS::IAM::ManagedPolicy resources
// attached to it, and the customer managed policies its ManagedPolicyArns
// name when the template defines them. AWS managed policies are not in the
// template; a role that uses one gets an error naming it, so nothing is
// silently evaluated with less (or more) than the role holds.
func (t *Template) RolePolicies(construct string, b Binding) ([]*Policy, error) {
	roleID, ok := t.logicalID(construct)
	if !ok {
		return nil, fmt.Errorf("template has no role %s", construct)
	}
	r := resolver{t: t, b: b}
	role := t.resources[roleID]
	var out []*Policy
	inline, _ := role.Properties["Policies"].([]any)
	for i, p := range inline {
		pm, _ := p.(map[string]any)
		name := fmt.Sprintf("%s/inline-%d", construct, i)
		if n, ok := pm["PolicyName"].(string); ok {
			name = construct + "/" + n
		}
		pol, err := r.policy(name, pm["PolicyDocument"])
		if err != nil {
			return nil, err
		}
		out = append(out, pol)
	}
	managed, _ := role.Properties["ManagedPolicyArns"].([]any)
	for _, m := range managed {
		pol, err := r.managed(m)
		if err != nil {
			return nil, fmt.Errorf("role %s: %w", construct, err)
		}
		out = append(out, pol)
	}
	attached, err := r.attached(roleID)
	if err != nil {
		return nil, err
	}
	return append(out, attached...), nil
}

// attached finds AWS::IAM::Policy and ManagedPolicy resources whose Roles
// name the role.
func (r resolver) attached(roleID string) ([]*Policy, error) {
	ids := make([]string, 0, len(r.t.resources))
	for id := range r.t.resources {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var out []*Policy
	for _, id := range ids {
		res := r.t.resources[id]
		if res.Type != "AWS::IAM::Policy" && res.Type != "AWS::IAM::ManagedPolicy" {
			continue
		}
		roles, _ := res.Properties["Roles"].([]any)
		for _, ref := range roles {
			if m, ok := ref.(map[string]any); ok && m["Ref"] == roleID {
				pol, err := r.policy(ConstructID(id), res.Properties["PolicyDocument"])
				if err != nil {
					return nil, err
				}
				out = append(out, pol)
			}
		}
	}
	return out, nil
}

// managed resolves one entry of ManagedPolicyArns to a policy defined in
// the template.
func (r resolver) managed(v any) (*Policy, error) {
	if m, ok := v.(map[string]any); ok {
		if ref, ok := m["Ref"].(string); ok {
			if res, ok := r.t.resources[ref]; ok && res.Type == "AWS::IAM::ManagedPolicy" {
				return r.policy(ConstructID(ref), res.Properties["PolicyDocument"])
			}
		}
	}
	arn, err := r.resolve(v)
	if err != nil {
		return nil, err
	}
	return nil, fmt.Errorf("managed policy %v is not defined in the template; the local cloud cannot evaluate it", arn)
}

func (r resolver) policy(name string, doc any) (*Policy, error) {
	resolved, err := r.resolve(doc)
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", name, err)
	}
	return ParsePolicy(name, resolved)
}

// resolver evaluates intrinsic functions under a binding.
type resolver struct {
	t *Template
	b Binding
}

func (r resolver) resolve(v any) (any, error) {
	switch x := v.(type) {
	case string:
		return r.replace(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			var err error
			if out[i], err = r.resolve(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, arg := range x {
				if strings.HasPrefix(k, "Fn::") || k == "Ref" {
					return r.intrinsic(k, arg)
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			var err error
			if out[r.replace(k)], err = r.resolve(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

func (r resolver) replace(s string) string {
	// Longest first, so one replacement never eats part of another.
	keys := make([]string, 0, len(r.b.Replace))
	for k := range r.b.Replace {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		s = strings.ReplaceAll(s, k, r.b.Replace[k])
	}
	return s
}

func (r resolver) intrinsic(fn string, arg any) (any, error) {
	switch fn {
	case "Ref":
		name, _ := arg.(string)
		return r.ref(name)
	case "Fn::GetAtt":
		parts, err := r.stringList(arg)
		if err != nil || len(parts) != 2 {
			return nil, fmt.Errorf("Fn::GetAtt %v: want [logicalId, attribute]", arg)
		}
		return r.attr(parts[0], parts[1])
	case "Fn::Join":
		return r.join(arg)
	case "Fn::Sub":
		return r.sub(arg)
	case "Fn::Select":
		return r.selectFn(arg)
	}
	return nil, fmt.Errorf("intrinsic %s is not one the local cloud resolves", fn)
}

func (r resolver) stringList(arg any) ([]string, error) {
	resolved, err := r.resolve(arg)
	if err != nil {
		return nil, err
	}
	return strings1(resolved)
}

func (r resolver) join(arg any) (any, error) {
	a, ok := arg.([]any)
	if !ok || len(a) != 2 {
		return nil, fmt.Errorf("Fn::Join %v: want [separator, list]", arg)
	}
	sep, _ := a[0].(string)
	parts, err := r.stringList(a[1])
	if err != nil {
		return nil, fmt.Errorf("Fn::Join: %w", err)
	}
	return strings.Join(parts, sep), nil
}

func (r resolver) selectFn(arg any) (any, error) {
	a, ok := arg.([]any)
	if !ok || len(a) != 2 {
		return nil, fmt.Errorf("Fn::Select %v: want [index, list]", arg)
	}
	idx, err := r.stringList(a[0])
	if err != nil || len(idx) != 1 {
		return nil, fmt.Errorf("Fn::Select index %v", a[0])
	}
	list, err := r.stringList(a[1])
	if err != nil {
		return nil, err
	}
	var i int
	if _, err := fmt.Sscan(idx[0], &i); err != nil || i < 0 || i >= len(list) {
		return nil, fmt.Errorf("Fn::Select index %s out of %d", idx[0], len(list))
	}
	return list[i], nil
}

var subVar = regexp.MustCompile(`\$\{([^}!][^}]*)\}`)

func (r resolver) sub(arg any) (any, error) {
	text, vars := "", map[string]any{}
	switch a := arg.(type) {
	case string:
		text = a
	case []any:
		if len(a) != 2 {
			return nil, fmt.Errorf("Fn::Sub %v: want text or [text, variables]", arg)
		}
		text, _ = a[0].(string)
		vars, _ = a[1].(map[string]any)
	}
	var firstErr error
	out := subVar.ReplaceAllStringFunc(text, func(m string) string {
		name := m[2 : len(m)-1]
		var v any
		var err error
		switch {
		case vars[name] != nil:
			v, err = r.resolve(vars[name])
		case strings.Contains(name, "."):
			id, attr, _ := strings.Cut(name, ".")
			v, err = r.attr(id, attr)
		default:
			v, err = r.ref(name)
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
		s, _ := v.(string)
		return s
	})
	if firstErr != nil {
		return nil, fmt.Errorf("Fn::Sub %q: %w", text, firstErr)
	}
	return r.replace(out), nil
}
