package awssim

import (
	"maps"
	"sync"
)

// account is the account-level state behind the services `nodewright
// doctor` reads: IAM's service-linked roles, Service Quotas, Lambda's
// concurrency, CloudFormation stacks and the cluster's access entries and
// authentication mode.
type account struct {
	mu sync.Mutex
	// noServiceLinked are the service-linked roles that do not exist (every
	// other one does: the simulator stands for an account that ran
	// `aws iam create-service-linked-role` once, as the README says).
	noServiceLinked map[string]bool
	// quotas by "service/quota code" (Service Quotas' ServiceCode and
	// QuotaCode); a code not set answers with its default.
	quotas map[string]float64
	// lambdaLimit is the account's concurrent executions limit and
	// lambdaReserved the executions functions reserve out of it.
	lambdaLimit, lambdaReserved int
	// stacks are CloudFormation stacks by name: their outputs.
	stacks map[string]map[string]string
	// entries are the cluster's access entries by principal ARN.
	entries map[string]AccessEntry
	// authMode is the cluster's accessConfig.authenticationMode.
	authMode string
}

// AccessEntry is one EKS access entry of the simulated cluster.
type AccessEntry struct {
	PrincipalARN     string
	Type             string // STANDARD, EC2_LINUX, EC2_WINDOWS, ...
	Username         string
	KubernetesGroups []string
}

func (a *account) init() {
	if a.quotas == nil {
		a.noServiceLinked, a.quotas, a.stacks, a.entries = map[string]bool{}, map[string]float64{}, map[string]map[string]string{}, map[string]AccessEntry{}
		// A new account's default concurrency (Lambda quotas page: "1,000
		// concurrent executions", lowered on some new accounts).
		a.lambdaLimit = 1000
		// EKS creates clusters in API_AND_CONFIG_MAP unless told otherwise
		// (EKS user guide, "Change authentication mode").
		a.authMode = "API_AND_CONFIG_MAP"
	}
}

// SetServiceLinkedRole makes a service-linked role exist or not (by its
// role name, e.g. AWSServiceRoleForEC2Spot). Every one exists by default.
func (s *Server) SetServiceLinkedRole(roleName string, exists bool) {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	if exists {
		delete(a.noServiceLinked, roleName)
	} else {
		a.noServiceLinked[roleName] = true
	}
}

// ServiceLinkedRoleExists reports whether a service-linked role exists.
func (s *Server) ServiceLinkedRoleExists(roleName string) bool {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	return !a.noServiceLinked[roleName]
}

// SetServiceQuota sets the value Service Quotas reports for a quota, e.g.
// ("ec2", "L-1216C47A", 32) for 32 On-Demand standard vCPUs.
func (s *Server) SetServiceQuota(service, code string, value float64) {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	a.quotas[service+"/"+code] = value
}

// SetLambdaConcurrency sets the account's concurrent executions limit and
// how many of them functions reserve (GetAccountSettings' AccountLimit).
func (s *Server) SetLambdaConcurrency(limit, reserved int) {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	a.lambdaLimit, a.lambdaReserved = limit, reserved
}

// PutStack creates or replaces a CloudFormation stack with its outputs, as
// a deployment leaves it (DescribeStacks reads it).
func (s *Server) PutStack(name string, outputs map[string]string) {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	a.stacks[name] = maps.Clone(outputs)
}

// DeleteStack removes a stack, as `cdk destroy` does.
func (s *Server) DeleteStack(name string) {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	delete(a.stacks, name)
}

// PutAccessEntry creates or replaces an access entry of the cluster.
func (s *Server) PutAccessEntry(e AccessEntry) {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	a.entries[e.PrincipalARN] = e
}

// DeleteAccessEntry removes the access entry of a principal.
func (s *Server) DeleteAccessEntry(principalARN string) {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	delete(a.entries, principalARN)
}

// SetEKSAuthenticationMode sets the cluster's authentication mode (API,
// API_AND_CONFIG_MAP or CONFIG_MAP) that DescribeCluster reports.
func (s *Server) SetEKSAuthenticationMode(mode string) {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	a.authMode = mode
}

func (s *Server) eksAuthenticationMode() string {
	a := &s.acct
	a.mu.Lock()
	defer a.mu.Unlock()
	a.init()
	return a.authMode
}
