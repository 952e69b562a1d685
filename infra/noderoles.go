package infra

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// Node roles: the IAM roles nodewright's nodes run with, worked out at
// synth time from the EC2NodeClasses, as Karpenter users write them.
//
//   - spec.role (a role name or ARN): the stack creates the instance
//     profile internal/aws launches with (aws.InstanceProfileName), an EKS
//     access entry for the role, and lets the controllers pass exactly that
//     role to EC2.
//   - spec.instanceProfile (an existing profile): used as is. Which role the
//     profile holds cannot be known at synth time, and PassRole is checked
//     on that role, so the user names it (context instanceProfileRoles)
//     rather than the stack granting PassRole on every role.
//   - neither (where the loader allows it), spec.role naming the stack's own
//     node role, or spec.instanceProfile naming that role's profile: the
//     stack's node role.
//
// Why the stack, not the controllers, creates the instance profiles
// (Karpenter creates, tags and deletes one per role at run time): a
// controller doing so needs iam:CreateInstanceProfile,
// iam:AddRoleToInstanceProfile, iam:TagInstanceProfile,
// iam:RemoveRoleFromInstanceProfile and iam:DeleteInstanceProfile, and
// AddRoleToInstanceProfile lets it put any role it may pass into a profile.
// Creating them in CloudFormation gives the functions no IAM write
// permission at all, and nothing is lost: a new role reaches the functions
// only through configDir, whose changes are deployed with the stack anyway.

// NodeRole is one IAM role nodes launch with.
type NodeRole struct {
	// Name is the role's name (the part of an ARN after the last "/").
	Name string
	// ARN is the role's ARN as the user gave it; "" for a role given by
	// name, which is then a role without a path in the stack's account.
	ARN string
	// Own is the stack's own node role (Config.NodeRoleName).
	Own bool
	// Profile: a class names the role in spec.role, so the stack creates
	// its instance profile (aws.InstanceProfileName); Own roles have theirs.
	Profile bool
	// Windows: a class using the role launches a Windows AMI family, so its
	// access entry is EC2_WINDOWS (which puts nodes in system:nodes as
	// EC2_LINUX does, plus the groups Windows nodes need).
	Windows bool
	// ExistingAccessEntry: the user says the role has an EKS access entry
	// already (context existingAccessEntries); the stack creates none.
	ExistingAccessEntry bool
	// Classes are the EC2NodeClasses using the role, in configuration order.
	Classes []string
}

// AccessEntryType is the EKS access entry type of the role's nodes.
func (r *NodeRole) AccessEntryType() string {
	if r.Windows {
		return "EC2_WINDOWS"
	}
	return "EC2_LINUX"
}

var (
	// IAM role ARNs: any partition, a 12-digit account, an optional path.
	roleARNRE = regexp.MustCompile(`^arn:aws[a-z-]*:iam::(\d{12}):role/((?:[\w+=,.@-]+/)*)([\w+=,.@-]{1,64})$`)
	// profileNameRE: instance profile names (IAM allows 128 characters).
	profileNameRE = regexp.MustCompile(`^[\w+=,.@-]{1,128}$`)
)

// parseRole reads a role given by name or ARN: its name, its ARN ("" for a
// name) and the ARN's account.
func parseRole(s string) (name, arn, account string, err error) {
	if m := roleARNRE.FindStringSubmatch(s); m != nil {
		return m[3], s, m[1], nil
	}
	if roleNameRE.MatchString(s) {
		return s, "", "", nil
	}
	return "", "", "", fmt.Errorf("%q is neither an IAM role name nor a role ARN (arn:aws:iam::<account>:role/[<path>/]<name>)", s)
}

// validateNodeRoleContext checks the form of the node-role context keys;
// whether they fit the EC2NodeClasses is checked by nodeRolesOf.
func (c *Config) validateNodeRoleContext(p *problems) {
	for _, e := range c.ExistingAccessEntries {
		if _, _, _, err := parseRole(e); err != nil {
			p.bad("%s: %v", CtxExistingAccessEntries, err)
		}
	}
	for _, profile := range slices.Sorted(maps.Keys(c.InstanceProfileRoles)) {
		if !profileNameRE.MatchString(profile) {
			p.bad("%s: %q is not an instance profile name", CtxInstanceProfileRoles, profile)
		}
		if _, _, _, err := parseRole(c.InstanceProfileRoles[profile]); err != nil {
			p.bad("%s: %s: %v", CtxInstanceProfileRoles, profile, err)
		}
	}
}

// pairs reads a map of strings: a JSON object in cdk.json, or from -c a
// JSON object or a list (comma-separated or JSON) of key=value items.
func (r *contextReader) pairs(key string, dst *map[string]string) {
	v := r.get(key)
	if s, ok := v.(string); ok && strings.HasPrefix(strings.TrimSpace(s), "{") {
		var m map[string]interface{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			r.fail("context %s: %v", key, err)
			return
		}
		v = m
	}
	out := map[string]string{}
	switch x := v.(type) {
	case nil:
		return
	case map[string]interface{}:
		for k, val := range x {
			s, ok := val.(string)
			if !ok {
				r.fail("context %s: %s: want a string, got %T", key, k, val)
				return
			}
			out[strings.TrimSpace(k)] = strings.TrimSpace(s)
		}
	default:
		var items []string
		r.list(key, &items)
		for _, it := range items {
			k, val, ok := strings.Cut(it, "=")
			if k, val = strings.TrimSpace(k), strings.TrimSpace(val); !ok || k == "" || val == "" {
				r.fail("context %s: %q: want <key>=<value>", key, it)
				return
			}
			out[k] = val
		}
	}
	*dst = out
}

// roleSet collects the roles of the EC2NodeClasses by name (IAM role names
// are unique in an account).
type roleSet struct {
	cfg    Config
	byName map[string]*NodeRole
	errs   []error
}

func (s *roleSet) bad(format string, args ...interface{}) {
	s.errs = append(s.errs, fmt.Errorf(format, args...))
}

// use records that class launches with role (a name or ARN); profile says
// the class named it in spec.role, so the stack makes its instance profile.
func (s *roleSet) use(role string, c NodeClassInfo, where string, profile bool) {
	name, arn, account, err := parseRole(role)
	if err != nil {
		s.bad("%s: %v", where, err)
		return
	}
	if arn != "" && s.cfg.Account != "" && account != s.cfg.Account {
		s.bad("%s: %s is in account %s, the stack's is %s: instances and EKS node access entries need a role of the cluster's account", where, arn, account, s.cfg.Account)
		return
	}
	r := s.byName[name]
	if r == nil {
		r = &NodeRole{Name: name, Own: name == s.cfg.NodeRoleName}
		s.byName[name] = r
	}
	if arn != "" && !r.Own {
		if r.ARN != "" && r.ARN != arn {
			s.bad("%s: %s and %s name one role twice (role names are unique in an account)", where, r.ARN, arn)
		}
		r.ARN = arn
	}
	r.Profile = r.Profile || profile && !r.Own
	r.Windows = r.Windows || c.Windows
	r.Classes = append(r.Classes, c.Name)
}

// profileRole is the role behind an instance profile a class names.
func (s *roleSet) profileRole(profile string, used map[string]bool) (string, bool) {
	if profile == nwaws.InstanceProfileName(s.cfg.ClusterName, s.cfg.NodeRoleName) {
		return s.cfg.NodeRoleName, true
	}
	if role, ok := s.cfg.InstanceProfileRoles[profile]; ok {
		used[profile] = true
		return role, true
	}
	for _, r := range s.byName {
		if r.Profile && profile == nwaws.InstanceProfileName(s.cfg.ClusterName, r.Name) {
			return r.Name, true
		}
	}
	return "", false
}

// nodeRolesOf lists the roles the EC2NodeClasses launch with, the stack's
// own first, then by name, and every way the configuration does not fit
// the IAM the stack can create.
func nodeRolesOf(cfg Config, nc *NodeConfig) ([]*NodeRole, error) {
	s := &roleSet{cfg: cfg, byName: map[string]*NodeRole{}}
	// Roles first: a class may name the profile the stack makes for a role
	// another class names.
	for _, c := range nc.NodeClasses {
		switch where := classSource(c); {
		case c.Role != "":
			s.use(c.Role, c, where+": spec.role", true)
		case c.InstanceProfile == "":
			s.use(cfg.NodeRoleName, c, where, false)
		}
	}
	used := map[string]bool{}
	for _, c := range nc.NodeClasses {
		if c.Role != "" || c.InstanceProfile == "" {
			continue
		}
		where := classSource(c) + ": spec.instanceProfile"
		role, ok := s.profileRole(c.InstanceProfile, used)
		if !ok {
			s.bad("%s: the stack cannot know which role instance profile %q holds, and lets the functions pass only the roles it is told: deploy with -c %s=%s=<role name or ARN> (or set spec.role instead)",
				where, c.InstanceProfile, CtxInstanceProfileRoles, c.InstanceProfile)
			continue
		}
		s.use(role, c, where, false)
	}
	for _, profile := range slices.Sorted(maps.Keys(cfg.InstanceProfileRoles)) {
		if !used[profile] {
			s.bad("%s: no EC2NodeClass names instance profile %q", CtxInstanceProfileRoles, profile)
		}
	}
	for _, e := range cfg.ExistingAccessEntries {
		name, _, _, err := parseRole(e)
		if r := s.byName[name]; err == nil && r != nil {
			r.ExistingAccessEntry = true
		} else if err == nil {
			s.bad("%s: no EC2NodeClass uses role %q", CtxExistingAccessEntries, e)
		}
	}
	roles := make([]*NodeRole, 0, len(s.byName))
	for _, r := range s.byName {
		roles = append(roles, r)
	}
	sort.Slice(roles, func(i, j int) bool {
		if roles[i].Own != roles[j].Own {
			return roles[i].Own
		}
		return roles[i].Name < roles[j].Name
	})
	return roles, errors.Join(s.errs...)
}

func classSource(c NodeClassInfo) string {
	if c.Source != "" {
		return c.Source
	}
	return "EC2NodeClass " + c.Name
}
