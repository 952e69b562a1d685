package awssim

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Role is an IAM role callers can sign as: its ARN and identity policies.
type Role struct {
	ARN      string
	Policies []*iam.Policy
}

// Denial is one request the simulator refused under a role's policies.
type Denial struct {
	Principal, Action, Resource string
	// Message is the decoded authorization message (the reason and the
	// request context IAM evaluated).
	Message iam.Message
}

func (d Denial) String() string { return d.Message.String() }

// StatementUse says how many requests a policy statement allowed.
type StatementUse struct {
	Role      string   // the role's ARN
	Statement string   // iam.Statement.ID
	Allow     bool     // an Allow statement (Deny statements allow nothing)
	Actions   []string // its Action (or NotAction) list
	Allowed   int
	// Used lists the actions it allowed at least once.
	Used []string
}

// authz holds the roles callers sign as and what their policies decided.
// Callers without a role (the test's or the operator's own credentials)
// are not evaluated: they stand for the account's administrator.
type authz struct {
	mu         sync.Mutex
	roles      map[string]*Role           // by access key ID
	byARN      map[string]*Role           // by ARN, the last registered (SimulatePrincipalPolicy)
	profiles   map[string]string          // instance profile ARN -> role ARN
	statements map[string]StatementUse    // "roleARN\x00statementID" -> the statement, every one registered
	used       map[string]int             // same key -> requests allowed
	usedAction map[string]map[string]bool // same key -> the actions it allowed
	denials    []Denial
}

// AddRole registers credentials that sign as a role: STS reports
// sessionARN for them and every request they sign is evaluated under the
// role's policies, as AWS evaluates an assumed role's.
func (s *Server) AddRole(accessKeyID, secretAccessKey, sessionARN string, role Role) {
	s.AddCredentials(accessKeyID, secretAccessKey, sessionARN)
	a := &s.authz
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.roles == nil {
		a.roles, a.statements, a.used, a.usedAction = map[string]*Role{}, map[string]StatementUse{}, map[string]int{}, map[string]map[string]bool{}
	}
	r := role
	a.roles[accessKeyID] = &r
	if a.byARN == nil {
		a.byARN = map[string]*Role{}
	}
	a.byARN[role.ARN] = &r
	for _, p := range role.Policies {
		for _, st := range p.Statements {
			a.statements[role.ARN+"\x00"+st.ID] = StatementUse{Role: role.ARN, Statement: st.ID, Allow: st.Allow, Actions: append(st.Action, st.NotAction...)}
		}
	}
}

// AddInstanceProfile tells the simulator which role an instance profile
// holds, for iam:PassRole on launches (it has no IAM service of its own).
func (s *Server) AddInstanceProfile(profileARN, roleARN string) {
	a := &s.authz
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.profiles == nil {
		a.profiles = map[string]string{}
	}
	a.profiles[profileARN] = roleARN
}

// Denials returns every request refused so far.
func (s *Server) Denials() []Denial {
	s.authz.mu.Lock()
	defer s.authz.mu.Unlock()
	return append([]Denial(nil), s.authz.denials...)
}

// StatementUses lists every registered statement with the number of
// requests it allowed (0: no call needed it), sorted.
func (s *Server) StatementUses() []StatementUse {
	a := &s.authz
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]StatementUse, 0, len(a.statements))
	for k, u := range a.statements {
		u.Allowed = a.used[k]
		u.Used = slices.Sorted(maps.Keys(a.usedAction[k]))
		out = append(out, u)
	}
	slices.SortFunc(out, func(x, y StatementUse) int {
		return cmp.Or(cmp.Compare(x.Role, y.Role), cmp.Compare(x.Statement, y.Statement))
	})
	return out
}

// accessKeyOf reads the access key ID from a SigV4 Authorization header.
func accessKeyOf(r *http.Request) string {
	auth := r.Header.Get("Authorization")
	i := strings.Index(auth, "Credential=")
	if i < 0 {
		return r.URL.Query().Get("X-Amz-Credential")
	}
	akid, _, _ := strings.Cut(auth[i+len("Credential="):], "/")
	return akid
}

// authorize evaluates a request's targets under the caller's role and
// returns the error AWS would answer with, or nil. deny formats the
// service's access-denied error from the decoded message.
func (s *Server) authorize(r *http.Request, targets []iam.Target, deny func(iam.Message) *protocol.APIError) *protocol.APIError {
	akid := accessKeyOf(r)
	s.authz.mu.Lock()
	role := s.authz.roles[akid]
	s.authz.mu.Unlock()
	if role == nil {
		return nil
	}
	principal, _ := s.principal(akid)
	for _, t := range targets {
		req, ok := s.request(role.ARN, t)
		req.Principal = principal.arn
		if !ok {
			continue
		}
		d := iam.Evaluate(role.Policies, req)
		if d.Effect == iam.Allowed {
			s.recordUse(role.ARN, req.Action, d)
			continue
		}
		m := iam.NewMessage(req, d)
		s.authz.mu.Lock()
		s.authz.denials = append(s.authz.denials, Denial{Principal: principal.arn, Action: req.Action, Resource: req.Resource, Message: m})
		s.authz.mu.Unlock()
		s.logger.Warn("iam denied", "principal", principal.arn, "action", req.Action, "resource", req.Resource, "effect", d.Effect.String())
		return deny(m)
	}
	return nil
}

func (s *Server) recordUse(roleARN, action string, d iam.Decision) {
	a := &s.authz
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, st := range d.Matched {
		k := roleARN + "\x00" + st.ID
		a.used[k]++
		if a.usedAction[k] == nil {
			a.usedAction[k] = map[string]bool{}
		}
		a.usedAction[k][action] = true
	}
}

// request builds the IAM request for one target with the condition keys
// the action's reference row lists for the target's resource type. ok is
// false when the action is not authorized against that type at all.
func (s *Server) request(roleARN string, t iam.Target) (iam.Request, bool) {
	ctx := iam.Context{}
	ctx.Set("aws:RequestedRegion", s.opts.Region)
	// For an assumed role, aws:PrincipalArn is the role's ARN.
	ctx.Set("aws:PrincipalArn", roleARN)
	ctx.Set("aws:PrincipalAccount", s.opts.AccountID)
	ctx.Set("aws:SecureTransport", "true") // the SDKs speak TLS to AWS
	for k, v := range t.Keys {
		ctx.Set(k, v...)
	}
	req := iam.Request{Principal: roleARN, Action: t.Action, Resource: t.ARN, Context: ctx}
	if iam.NoPermissionRequired[t.Action] {
		return req, false
	}
	if t.Action == "iam:PassRole" {
		req.Resource = s.roleOfProfile(t.ARN)
		return req, true
	}
	spec, known := iam.Lookup(t.Action)
	if !known {
		// Fail closed: an action missing from the table is evaluated with
		// no resource keys, so only an unconditional grant allows it.
		return req, true
	}
	if t.Type == "" || len(spec.Resources) == 0 {
		req.Resource = "*"
		return req, true
	}
	var row *iam.ResourceType
	for i := range spec.Resources {
		if spec.Resources[i].Name == t.Type {
			row = &spec.Resources[i]
		}
	}
	if row == nil {
		return req, false
	}
	service, _, _ := strings.Cut(t.Action, ":")
	// The keys the action's row lists for the type, the action-wide ones,
	// and the resource type's own (some services list aws:ResourceTag only
	// there).
	keys := append(append(append([]string(nil), row.ConditionKeys...), spec.ConditionKeys...), iam.ResourceTypeKeys[service+":"+t.Type]...)
	for _, k := range keys {
		switch {
		case strings.HasPrefix(k, "aws:RequestTag/") && t.RequestTags != nil:
			tagKeys := make([]string, 0, len(t.RequestTags))
			for tk, tv := range t.RequestTags {
				ctx.Set("aws:RequestTag/"+tk, tv)
				tagKeys = append(tagKeys, tk)
			}
			slices.Sort(tagKeys)
			ctx.Set("aws:TagKeys", tagKeys...)
		case strings.HasPrefix(k, "aws:ResourceTag/"):
			for tk, tv := range t.Tags {
				ctx.Set("aws:ResourceTag/"+tk, tv)
			}
		case strings.HasPrefix(k, service+":ResourceTag/"):
			for tk, tv := range t.Tags {
				ctx.Set(service+":ResourceTag/"+tk, tv)
			}
		}
	}
	return req, true
}

// roleOfProfile maps an instance profile to its role's ARN; an unknown
// profile maps to a role no policy names, so passing it is denied (AWS
// would refuse the unknown profile anyway).
func (s *Server) roleOfProfile(profileARN string) string {
	s.authz.mu.Lock()
	defer s.authz.mu.Unlock()
	if role, ok := s.authz.profiles[profileARN]; ok {
		return role
	}
	name := profileARN[strings.LastIndex(profileARN, "/")+1:]
	return fmt.Sprintf("arn:aws:iam::%s:role/unknown-instance-profile-%s", s.opts.AccountID, name)
}

// Access-denied errors in each protocol's own words.
func ec2Denied(m iam.Message) *protocol.APIError {
	return &protocol.APIError{Code: "UnauthorizedOperation", Status: http.StatusForbidden,
		Message: "You are not authorized to perform this operation. " + m.Reason() + ". Encoded authorization failure message: " + m.Encode()}
}

func jsonDenied(code string, status int) func(iam.Message) *protocol.APIError {
	return func(m iam.Message) *protocol.APIError {
		return &protocol.APIError{Code: code, Status: status, Message: m.Reason()}
	}
}

func (s *Server) authorizeEC2(r *http.Request, action string, form url.Values) *protocol.APIError {
	targets, err := s.ec2.Authorizations(action, form)
	if err != nil {
		return nil // a malformed request fails in the handler, as EC2 validates first
	}
	return s.authorize(r, targets, ec2Denied)
}

// deniedCode is each JSON service's access-denied error code and status.
func deniedCode(service string) (string, int) {
	if service == "sqs" {
		return "AccessDenied", http.StatusForbidden
	}
	return "AccessDeniedException", http.StatusBadRequest
}
