package kubeplane

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/client-go/rest"
)

// User is a static-token user with exactly the rights RBAC gives its
// groups: how tests and the demo run a function's client with the rights
// the stack gives it in EKS, not the admin's.
type User struct {
	Name   string
	Groups []string
}

// UserRESTConfig returns a client configuration authenticating as the
// Options.Users entry name.
func (p *Plane) UserRESTConfig(name string) (*rest.Config, error) {
	tok, ok := p.userTokens[name]
	if !ok {
		return nil, fmt.Errorf("kubeplane: no user %q (Options.Users)", name)
	}
	cfg := rest.CopyConfig(p.rest)
	cfg.BearerToken = tok
	cfg.UserAgent = "nodewright-localcloud-" + name
	return cfg, nil
}

// userTokenLines are the token-file lines of Options.Users.
func (p *Plane) userTokenLines(users []User) []string {
	p.userTokens = map[string]string{}
	var lines []string
	for i, u := range users {
		tok := randToken()
		p.userTokens[u.Name] = tok
		lines = append(lines, fmt.Sprintf(`%s,%s,uid-user-%d,"%s"`, tok, u.Name, i, strings.Join(u.Groups, ",")))
	}
	return lines
}

// auditArgs log the requests of the audited groups (and only theirs), so
// Forbidden can tell whether RBAC ever refused them something.
func (p *Plane) auditArgs(groups []string) ([]string, error) {
	if len(groups) == 0 {
		return nil, nil
	}
	quoted := make([]string, len(groups))
	for i, g := range groups {
		quoted[i] = fmt.Sprintf("%q", g)
	}
	policy := fmt.Sprintf(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
- level: Metadata
  userGroups: [%s]
- level: None
`, strings.Join(quoted, ", "))
	path := filepath.Join(p.Dir, "audit-policy.yaml")
	if err := os.WriteFile(path, []byte(policy), 0o600); err != nil {
		return nil, fmt.Errorf("kubeplane: audit policy: %w", err)
	}
	p.auditLog = filepath.Join(p.Dir, "logs", "audit.log")
	return []string{"--audit-policy-file=" + path, "--audit-log-path=" + p.auditLog, "--audit-log-format=json", "--audit-log-mode=blocking"}, nil
}

// AuditEvent is one audited request, reduced to what tests check.
type AuditEvent struct {
	User, Verb, Resource, Subresource, Namespace, Name string
	Code                                               int
	// Forbidden: RBAC refused it (a 403 from admission, such as an Event
	// created in a namespace being deleted, is not a missing right).
	Forbidden bool
}

func (e AuditEvent) String() string {
	res := e.Resource
	if e.Subresource != "" {
		res += "/" + e.Subresource
	}
	return fmt.Sprintf("%s %s %s %s/%s", e.User, e.Verb, res, e.Namespace, e.Name)
}

// Audit returns the audited groups' requests so far, in order.
func (p *Plane) Audit() ([]AuditEvent, error) {
	if p.auditLog == "" {
		return nil, nil
	}
	f, err := os.Open(p.auditLog)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("kubeplane: audit log: %w", err)
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		out = append(out, AuditEvent{User: ev.User.Username, Verb: ev.Verb, Resource: ev.ObjectRef.Resource, Subresource: ev.ObjectRef.Subresource,
			Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name, Code: ev.ResponseStatus.Code,
			Forbidden: ev.ResponseStatus.Code == 403 && ev.Annotations["authorization.k8s.io/decision"] == "forbid"})
	}
	return out, sc.Err()
}

// Forbidden lists the audited groups' requests RBAC refused so far, once
// each, as "user verb resource[/subresource] namespace/name".
func (p *Plane) Forbidden() ([]string, error) {
	events, err := p.Audit()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range events {
		if line := ev.String(); ev.Forbidden && !slices.Contains(out, line) {
			out = append(out, line)
		}
	}
	return out, nil
}

type auditEvent struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource, Subresource, Namespace, Name string
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}
