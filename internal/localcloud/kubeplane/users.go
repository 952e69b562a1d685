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

// Forbidden lists the audited groups' requests RBAC refused so far, as "user verb resource[/subresource] namespace/name".
func (p *Plane) Forbidden() ([]string, error) {
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
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		// Only the authorizer's refusals: a 403 from admission (an Event
		// created in a namespace being deleted) is not a missing right.
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.ResponseStatus.Code != 403 || ev.Annotations["authorization.k8s.io/decision"] != "forbid" {
			continue
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		line := fmt.Sprintf("%s %s %s %s/%s", ev.User.Username, ev.Verb, res, ev.ObjectRef.Namespace, ev.ObjectRef.Name)
		if !slices.Contains(out, line) {
			out = append(out, line)
		}
	}
	return out, sc.Err()
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
