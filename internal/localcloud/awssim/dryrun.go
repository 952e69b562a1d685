package awssim

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// dryRun reports whether an EC2 request asks for a dry run (DryRun=true).
// Its authorization was evaluated as the call's would be (so a refusal is
// UnauthorizedOperation); serveDryRun then answers without running it.
func dryRun(form url.Values) bool { return strings.EqualFold(form.Get("DryRun"), "true") }

// serveDryRun answers an authorized dry run: DryRunOperation (412) if the
// call would have succeeded, else its error (ec2sim.Cloud.DryRun).
func (s *Server) serveDryRun(w http.ResponseWriter, reqID, action string, form url.Values, done func(*protocol.APIError, int)) {
	ae := s.ec2.DryRun(action, form)
	done(ae, 0)
	protocol.WriteError(w, protocol.EC2Query, reqID, ae, "")
}
