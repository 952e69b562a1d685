// Package doctortest is a local cloud as `nodewright doctor` sees an
// account (tests only): the AWS simulator with IAM enforced, a cluster,
// the configuration a stack deploys and, once Deploy is called, the stack
// itself (its roles under the synthesized policies, its outputs and
// access entries).
package doctortest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/doctor"
	"github.com/nodewright/nodewright/internal/localcloud"
)

// Config is the configuration the stack deploys: one NodePool of c, m and
// r instances, spot or on-demand, and its class finding subnets and
// security groups by karpenter.sh/discovery, as "Getting started on AWS".
const Config = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    spec:
      requirements:
        - key: kubernetes.io/arch
          operator: In
          values: ["amd64", "arm64"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m", "r"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  limits:
    cpu: "100"
---
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: default
spec:
  role: "KarpenterNodeRole-CLUSTER"
  amiSelectorTerms:
    - alias: al2023@latest
  subnetSelectorTerms:
    - tags:
        karpenter.sh/discovery: "CLUSTER"
  securityGroupSelectorTerms:
    - tags:
        karpenter.sh/discovery: "CLUSTER"
`

// Env is one test's account.
type Env struct {
	Cloud     *localcloud.Cloud
	ConfigDir string
	Config    *apis.Config
	Cluster   string
	Region    string
	// Table is the deployed stack's table name (Deploy).
	Table string
}

// New starts the simulator (no control plane: doctor reads only AWS), gives
// the cluster an endpoint, writes the configuration and points this
// process's AWS SDK at the simulator with the account administrator's
// credentials (t.Setenv), as a user's shell would be.
func New(t *testing.T) *Env {
	t.Helper()
	cloud := localcloud.ForTest(t, localcloud.Options{Components: localcloud.AWS})
	sim := cloud.AWS
	sim.SetEKSCluster("https://127.0.0.1:6443", []byte("-----BEGIN CERTIFICATE-----\nlocal\n-----END CERTIFICATE-----\n"), sim.Options().KubernetesVersion)
	for _, kv := range cloud.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "default.yaml"), []byte(strings.ReplaceAll(Config, "CLUSTER", cloud.ClusterName)), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := apis.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Cloud: cloud, ConfigDir: dir, Config: cfg, Cluster: cloud.ClusterName, Region: cloud.Region}
}

// Deploy deploys the stack (again): its roles under the synthesized
// policies (less the statement NODEWRIGHT_IAM_DROP names), outputs and
// access entries.
func (e *Env) Deploy(t *testing.T) {
	t.Helper()
	e.Table = "nodewright-" + e.Cluster + "-table"
	_, err := e.Cloud.Deploy(localcloud.StackResources{Table: e.Table, ProvisionQueue: e.Table + "-provision", WorkQueue: e.Table + "-work",
		InterruptionQueue: e.Table + "-interruption", DisruptionQueue: e.Table + "-disruption", NodeRole: "KarpenterNodeRole-" + e.Cluster})
	if err != nil {
		t.Fatal(err)
	}
}

// Clients are doctor's clients from the SDK's default configuration (the
// environment New set).
func (e *Env) Clients(t *testing.T) doctor.Clients {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return doctor.NewClients(cfg)
}

// Run runs doctor on the account.
func (e *Env) Run(t *testing.T) *doctor.Report {
	t.Helper()
	r, err := doctor.Run(context.Background(), doctor.Options{Cluster: e.Cluster, Region: e.Region, Config: e.Config}, e.Clients(t))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// StatementID is the ID of the controller role's statement with a Sid
// (for localcloud.EnvIAMDrop), from the statements deployments registered.
func (e *Env) StatementID(t *testing.T, sid string) string {
	t.Helper()
	for _, u := range e.Cloud.AWS.StatementUses() {
		if strings.HasSuffix(u.Statement, " "+sid) && strings.Contains(u.Role, "controller") {
			id, _, _ := strings.Cut(u.Statement, " ")
			return id
		}
	}
	t.Fatalf("no statement %s in the deployed controller role", sid)
	return ""
}
