package awssim

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// The IAM query API (https://iam.amazonaws.com/doc/2010-05-08/), as far as
// `nodewright doctor` calls it: SimulatePrincipalPolicy over the roles a
// deployment registered (AddRole), GetRole and CreateServiceLinkedRole.
const iamXMLNS = "https://iam.amazonaws.com/doc/2010-05-08/"

// serviceLinkedRoles maps a service's principal to the name of its
// service-linked role (IAM user guide, "AWS services that work with IAM";
// EC2 user guide, "Service-linked role for Spot Instance requests").
var serviceLinkedRoles = map[string]string{"spot.amazonaws.com": "AWSServiceRoleForEC2Spot"}

func (s *Server) serveIAM(w http.ResponseWriter, r *http.Request, reqID, action string, form url.Values) {
	ferr, done := s.begin(r.Context(), "iam", action, flatten(form))
	fail := func(e *protocol.APIError) {
		done(e, 0)
		protocol.WriteError(w, protocol.AWSQuery, reqID, e, "")
	}
	if ferr != nil {
		fail(ferr)
		return
	}
	target := iam.Target{Action: "iam:" + action, ARN: "*"}
	if ae := s.authorize(r, []iam.Target{target}, jsonDenied("AccessDenied", http.StatusForbidden)); ae != nil {
		fail(ae)
		return
	}
	var body string
	var err *protocol.APIError
	switch action {
	case "SimulatePrincipalPolicy":
		body, err = s.simulatePrincipalPolicy(form)
	case "GetRole":
		body, err = s.getRole(form.Get("RoleName"))
	case "CreateServiceLinkedRole":
		body, err = s.createServiceLinkedRole(form.Get("AWSServiceName"))
	default:
		err = protocol.Errorf("InvalidAction", "Could not find operation %s for version 2010-05-08", action)
	}
	if err != nil {
		fail(err)
		return
	}
	done(nil, http.StatusOK)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-RequestId", reqID)
	fmt.Fprintf(w, `<%sResponse xmlns="%s"><%sResult>%s</%sResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>`,
		action, iamXMLNS, action, body, action, reqID, action)
}

// roleByARN is the role registered last under an ARN (each local
// deployment registers its stack's roles under the same names).
func (s *Server) roleByARN(arn string) *Role {
	a := &s.authz
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byARN[arn]
}

// simulatePrincipalPolicy evaluates every action on every resource under the
// principal's identity policies and the PolicyInputList, with exactly the
// context entries given (IAM API reference, SimulatePrincipalPolicy: "The
// simulation does not perform the API operations; it only checks the
// authorization to determine if the simulated policies allow or deny the
// operations"; one EvaluationResult per action and resource).
func (s *Server) simulatePrincipalPolicy(form url.Values) (string, *protocol.APIError) {
	source := form.Get("PolicySourceArn")
	role := s.roleByARN(source)
	if role == nil {
		return "", &protocol.APIError{Code: "NoSuchEntity", Status: http.StatusNotFound,
			Message: fmt.Sprintf("The role with name %s cannot be found.", source[strings.LastIndex(source, "/")+1:])}
	}
	actions := members(form, "ActionNames")
	if len(actions) == 0 {
		return "", &protocol.APIError{Code: "ValidationError", Status: http.StatusBadRequest, Message: "1 validation error detected: Value null at 'actionNames' failed to satisfy constraint: Member must not be null"}
	}
	resources := members(form, "ResourceArns")
	if len(resources) == 0 {
		resources = []string{"*"} // "If you do not specify a value, the default is '*'"
	}
	policies := append([]*iam.Policy(nil), role.Policies...)
	for i, doc := range members(form, "PolicyInputList") {
		p, err := iam.ParsePolicyJSON(fmt.Sprintf("PolicyInputList.%d", i+1), []byte(doc))
		if err != nil {
			return "", &protocol.APIError{Code: "MalformedPolicyDocument", Status: http.StatusBadRequest, Message: err.Error()}
		}
		policies = append(policies, p)
	}
	ctx, perr := contextEntries(form)
	if perr != nil {
		return "", perr
	}
	var b strings.Builder
	b.WriteString("<IsTruncated>false</IsTruncated><EvaluationResults>")
	for _, action := range actions {
		for _, res := range resources {
			sim := iam.Simulate(policies, iam.Request{Principal: source, Action: action, Resource: res, Context: ctx})
			writeEvaluationResult(&b, action, res, sim)
		}
	}
	b.WriteString("</EvaluationResults>")
	return b.String(), nil
}

// writeEvaluationResult renders one EvaluationResult: EvalDecision is
// allowed, explicitDeny or implicitDeny (IAM API reference,
// EvaluationResult); MatchedStatements name their policy (SourcePolicyId)
// and its type (role for the principal's own policies, none for the
// PolicyInputList's).
func writeEvaluationResult(b *strings.Builder, action, resource string, sim iam.Simulation) {
	decision := map[iam.Effect]string{iam.Allowed: "allowed", iam.ExplicitDeny: "explicitDeny", iam.ImplicitDeny: "implicitDeny"}[sim.Decision.Effect]
	fmt.Fprintf(b, "<member><EvalActionName>%s</EvalActionName><EvalResourceName>%s</EvalResourceName><EvalDecision>%s</EvalDecision><MatchedStatements>",
		esc(action), esc(resource), decision)
	for _, st := range sim.Decision.Matched {
		kind := "role"
		if strings.HasPrefix(st.ID, "PolicyInputList.") {
			kind = "none"
		}
		fmt.Fprintf(b, "<member><SourcePolicyId>%s</SourcePolicyId><SourcePolicyType>%s</SourcePolicyType></member>", esc(iam.PolicyName(st.ID)), kind)
	}
	b.WriteString("</MatchedStatements><MissingContextValues>")
	for _, k := range sim.Missing {
		fmt.Fprintf(b, "<member>%s</member>", esc(k))
	}
	b.WriteString("</MissingContextValues></member>")
}

// members reads a query-protocol list: Name.member.1, Name.member.2, ...
func members(form url.Values, name string) []string {
	var out []string
	for i := 1; ; i++ {
		v, ok := form[name+".member."+strconv.Itoa(i)]
		if !ok || len(v) == 0 {
			return out
		}
		out = append(out, v[0])
	}
}

// contextEntries reads ContextEntries (ContextKeyName, ContextKeyValues,
// ContextKeyType) into a request context; every type is compared as text,
// as the evaluator compares every condition value.
func contextEntries(form url.Values) (iam.Context, *protocol.APIError) {
	ctx := iam.Context{}
	for i := 1; ; i++ {
		prefix := "ContextEntries.member." + strconv.Itoa(i) + "."
		name := form.Get(prefix + "ContextKeyName")
		if name == "" {
			return ctx, nil
		}
		switch t := form.Get(prefix + "ContextKeyType"); t {
		case "string", "stringList", "numeric", "numericList", "boolean", "booleanList", "ip", "ipList", "binary", "binaryList", "date", "dateList":
		default:
			return nil, &protocol.APIError{Code: "InvalidInput", Status: http.StatusBadRequest, Message: fmt.Sprintf("Invalid ContextKeyType %q for %s", t, name)}
		}
		ctx.Set(name, members(form, prefix+"ContextKeyValues")...)
	}
}

// getRole answers GetRole for service-linked roles that exist and for the
// roles deployments registered; any other name is NoSuchEntity (404).
func (s *Server) getRole(name string) (string, *protocol.APIError) {
	path := "/"
	known := false
	for svc, slr := range serviceLinkedRoles {
		if slr == name {
			path, known = "/aws-service-role/"+svc+"/", s.ServiceLinkedRoleExists(name)
		}
	}
	arn := fmt.Sprintf("arn:aws:iam::%s:role%s%s", s.opts.AccountID, path, name)
	if !strings.HasPrefix(name, "AWSServiceRoleFor") {
		known = s.roleByARN(arn) != nil
	}
	if !known {
		return "", &protocol.APIError{Code: "NoSuchEntity", Status: http.StatusNotFound, Message: fmt.Sprintf("The role with name %s cannot be found.", name)}
	}
	return fmt.Sprintf("<Role><Path>%s</Path><RoleName>%s</RoleName><RoleId>AROA%016X</RoleId><Arn>%s</Arn><CreateDate>%s</CreateDate></Role>",
		esc(path), esc(name), len(name), esc(arn), s.created.UTC().Format("2006-01-02T15:04:05Z")), nil
}

// createServiceLinkedRole creates a service's service-linked role; a second
// call fails as IAM's does ("Service role name ... has been taken in this
// account").
func (s *Server) createServiceLinkedRole(service string) (string, *protocol.APIError) {
	name, ok := serviceLinkedRoles[service]
	if !ok {
		return "", &protocol.APIError{Code: "InvalidInput", Status: http.StatusBadRequest, Message: "The simulator knows no service-linked role of " + service}
	}
	if s.ServiceLinkedRoleExists(name) {
		return "", &protocol.APIError{Code: "InvalidInput", Status: http.StatusBadRequest,
			Message: fmt.Sprintf("Service role name %s has been taken in this account, please try a different suffix.", name)}
	}
	s.SetServiceLinkedRole(name, true)
	body, _ := s.getRole(name)
	return body, nil
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}
