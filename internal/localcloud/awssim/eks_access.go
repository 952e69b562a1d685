package awssim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// serveAccessEntries answers the EKS access entry reads (EKS API
// reference): ListAccessEntries (GET /clusters/NAME/access-entries: the
// principal ARNs) and DescribeAccessEntry (GET
// /clusters/NAME/access-entries/PRINCIPAL: its type, username and groups;
// ResourceNotFoundException, 404, for a principal without one). rest is the
// escaped path after /clusters/.
func (s *Server) serveAccessEntries(w http.ResponseWriter, r *http.Request, reqID, rest string) {
	cluster, tail, _ := strings.Cut(rest, "/access-entries")
	principal, _ := url.PathUnescape(strings.TrimPrefix(tail, "/"))
	cluster, _ = url.PathUnescape(cluster)
	op := "ListAccessEntries"
	if principal != "" {
		op = "DescribeAccessEntry"
	}
	ferr, done := s.begin(r.Context(), "eks", op, map[string]string{"name": cluster, "principalArn": principal})
	fail := func(e *protocol.APIError) {
		done(e, 0)
		protocol.WriteError(w, protocol.RESTJSON, reqID, e, "")
	}
	targets := s.eksTargets(cluster)
	targets[0].Action = "eks:" + op
	switch {
	case ferr != nil:
		fail(ferr)
		return
	case r.Method != http.MethodGet:
		fail(&protocol.APIError{Code: "InvalidRequestException", Message: r.Method + " " + r.URL.Path + " is not simulated", Status: http.StatusNotFound})
		return
	}
	if ae := s.authorize(r, targets, jsonDenied("AccessDeniedException", http.StatusForbidden)); ae != nil {
		fail(ae)
		return
	}
	if cluster != s.opts.ClusterName {
		fail(&protocol.APIError{Code: "ResourceNotFoundException", Message: fmt.Sprintf("No cluster found for name: %s.", cluster), Status: http.StatusNotFound})
		return
	}
	a := &s.acct
	a.mu.Lock()
	a.init()
	entries := make([]AccessEntry, 0, len(a.entries))
	for _, e := range a.entries {
		entries = append(entries, e)
	}
	a.mu.Unlock()
	slices.SortFunc(entries, func(x, y AccessEntry) int { return strings.Compare(x.PrincipalARN, y.PrincipalARN) })
	var out any
	if op == "ListAccessEntries" {
		arns := []string{}
		for _, e := range entries {
			arns = append(arns, e.PrincipalARN)
		}
		out = map[string]any{"accessEntries": arns}
	} else {
		i := slices.IndexFunc(entries, func(e AccessEntry) bool { return e.PrincipalARN == principal })
		if i < 0 {
			fail(&protocol.APIError{Code: "ResourceNotFoundException", Status: http.StatusNotFound,
				Message: fmt.Sprintf("The specified access entry resource is not found: %s", principal)})
			return
		}
		out = map[string]any{"accessEntry": s.accessEntryJSON(entries[i])}
	}
	done(nil, http.StatusOK)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-RequestId", reqID)
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) accessEntryJSON(e AccessEntry) map[string]any {
	groups := e.KubernetesGroups
	if groups == nil {
		groups = []string{}
	}
	name := e.PrincipalARN[strings.LastIndex(e.PrincipalARN, "/")+1:]
	return map[string]any{
		"clusterName": s.opts.ClusterName, "principalArn": e.PrincipalARN, "type": e.Type,
		"username": e.Username, "kubernetesGroups": groups,
		"accessEntryArn": fmt.Sprintf("arn:aws:eks:%s:%s:access-entry/%s/role/%s/%s/0", s.opts.Region, s.opts.AccountID, s.opts.ClusterName, s.opts.AccountID, name),
		"createdAt":      float64(s.created.Unix()), "modifiedAt": float64(s.created.Unix()), "tags": map[string]string{},
	}
}
