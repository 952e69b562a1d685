package awssim

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// serveCloudFormation answers DescribeStacks for the stacks deployments put
// (PutStack): a stack's name, status and outputs (CloudFormation API
// reference, DescribeStacks); an unknown stack is the ValidationError
// "Stack with id NAME does not exist" (400), as CloudFormation answers.
func (s *Server) serveCloudFormation(w http.ResponseWriter, r *http.Request, reqID, action string, form url.Values) {
	ferr, done := s.begin(r.Context(), "cloudformation", action, flatten(form))
	fail := func(e *protocol.APIError) {
		done(e, 0)
		protocol.WriteError(w, protocol.AWSQuery, reqID, e, "")
	}
	if ferr != nil {
		fail(ferr)
		return
	}
	name := form.Get("StackName")
	target := iam.Target{Action: "cloudformation:" + action, Type: "stack", ARN: s.stackARN(name)}
	if ae := s.authorize(r, []iam.Target{target}, jsonDenied("AccessDenied", http.StatusForbidden)); ae != nil {
		fail(ae)
		return
	}
	if action != "DescribeStacks" {
		fail(protocol.Errorf("InvalidAction", "Could not find operation %s for version 2010-05-15", action))
		return
	}
	a := &s.acct
	a.mu.Lock()
	a.init()
	outputs, ok := a.stacks[name]
	a.mu.Unlock()
	if !ok {
		fail(&protocol.APIError{Code: "ValidationError", Status: http.StatusBadRequest, Message: fmt.Sprintf("Stack with id %s does not exist", name)})
		return
	}
	var b strings.Builder
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range outputs {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, "<member><OutputKey>%s</OutputKey><OutputValue>%s</OutputValue></member>", esc(k), esc(outputs[k]))
	}
	done(nil, http.StatusOK)
	w.Header().Set("Content-Type", "text/xml")
	w.Header().Set("X-Amzn-RequestId", reqID)
	fmt.Fprintf(w, `<DescribeStacksResponse xmlns="http://cloudformation.amazonaws.com/doc/2010-05-15/"><DescribeStacksResult><Stacks><member><StackName>%s</StackName><StackId>%s</StackId><StackStatus>CREATE_COMPLETE</StackStatus><CreationTime>%s</CreationTime><Outputs>%s</Outputs></member></Stacks></DescribeStacksResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></DescribeStacksResponse>`,
		esc(name), esc(s.stackARN(name)), s.created.UTC().Format("2006-01-02T15:04:05Z"), b.String(), reqID)
}

func (s *Server) stackARN(name string) string {
	return fmt.Sprintf("arn:aws:cloudformation:%s:%s:stack/%s/00000000-0000-4000-8000-000000000000", s.opts.Region, s.opts.AccountID, name)
}
