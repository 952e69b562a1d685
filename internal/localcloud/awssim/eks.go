package awssim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

type eksCluster struct {
	endpoint string
	caPEM    []byte
	version  string
}

// SetEKSCluster sets what DescribeCluster reports: the local kube-apiserver's
// endpoint, its CA certificate (PEM) and Kubernetes version. Until it is
// called the cluster is reported as CREATING without an endpoint.
func (s *Server) SetEKSCluster(endpoint string, caPEM []byte, version string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.eks = eksCluster{endpoint: endpoint, caPEM: caPEM, version: version}
}

// serveEKS serves the REST-JSON EKS API: GET /clusters/<name> (DescribeCluster)
// and the access entry reads (serveAccessEntries).
func (s *Server) serveEKS(w http.ResponseWriter, r *http.Request, reqID string) {
	if rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/clusters/"); ok && strings.Contains(rest, "/access-entries") {
		s.serveAccessEntries(w, r, reqID, rest)
		return
	}
	name, isDescribe := strings.CutPrefix(r.URL.Path, "/clusters/")
	op := "DescribeCluster"
	if !isDescribe || r.Method != http.MethodGet || strings.Contains(name, "/") {
		op = r.Method + " " + r.URL.Path
	}
	ferr, done := s.begin(r.Context(), "eks", op, map[string]string{"name": name})
	fail := func(e *protocol.APIError) {
		done(e, 0)
		protocol.WriteError(w, protocol.RESTJSON, reqID, e, "")
	}
	switch {
	case ferr != nil:
		fail(ferr)
		return
	case op != "DescribeCluster":
		fail(&protocol.APIError{Code: "InvalidRequestException", Message: op + " is not simulated", Status: http.StatusNotFound})
		return
	}
	if ae := s.authorize(r, s.eksTargets(name), jsonDenied("AccessDeniedException", http.StatusForbidden)); ae != nil {
		fail(ae)
		return
	}
	switch {
	case name != s.opts.ClusterName:
		fail(&protocol.APIError{Code: "ResourceNotFoundException", Message: fmt.Sprintf("No cluster found for name: %s.", name), Status: http.StatusNotFound})
		return
	}
	s.mu.Lock()
	c := s.eks
	s.mu.Unlock()
	version := c.version
	if version == "" {
		version = s.opts.KubernetesVersion
	}
	net := s.ec2.Network()
	cluster := map[string]any{
		"name":      s.opts.ClusterName,
		"arn":       fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", s.opts.Region, s.opts.AccountID, s.opts.ClusterName),
		"createdAt": float64(s.created.Unix()),
		"version":   version, "platformVersion": "eks.1", "status": "CREATING",
		"roleArn": fmt.Sprintf("arn:aws:iam::%s:role/%s-cluster", s.opts.AccountID, s.opts.ClusterName),
		"resourcesVpcConfig": map[string]any{
			"vpcId": net.VPCID, "subnetIds": net.SubnetIDs, "securityGroupIds": []string{},
			"clusterSecurityGroupId": net.ClusterSecurityGroupID, "endpointPublicAccess": true, "endpointPrivateAccess": true,
			"publicAccessCidrs": []string{"0.0.0.0/0"},
		},
		"kubernetesNetworkConfig": map[string]any{"serviceIpv4Cidr": s.opts.ServiceCIDR, "ipFamily": "ipv4"},
		"accessConfig":            map[string]any{"authenticationMode": s.eksAuthenticationMode()},
		"tags":                    map[string]string{},
	}
	if c.endpoint != "" {
		cluster["status"] = "ACTIVE"
		cluster["endpoint"] = c.endpoint
		cluster["certificateAuthority"] = map[string]string{"data": base64.StdEncoding.EncodeToString(c.caPEM)}
		cluster["identity"] = map[string]any{"oidc": map[string]string{"issuer": c.endpoint}}
	}
	done(nil, http.StatusOK)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-RequestId", reqID)
	_ = json.NewEncoder(w).Encode(map[string]any{"cluster": cluster})
}
