package contract_test

import (
	"bytes"
	"context"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/doctor"
	"github.com/nodewright/nodewright/internal/doctor/contract"
	"github.com/nodewright/nodewright/internal/doctor/doctortest"
)

// Environment of `make aws-contract`.
const (
	envCluster = "NODEWRIGHT_CONTRACT_CLUSTER"
	// envConfig is the configDir the stack was deployed with (default
	// karpenter/ at the repository's root, as "Getting started on AWS").
	envConfig = "NODEWRIGHT_CONTRACT_CONFIG"
)

// TestAWSContract runs the suite on a real account: the cluster named by
// NODEWRIGHT_CONTRACT_CLUSTER, with the stack deployed, credentials and
// region from the SDK's default chain. It launches (and terminates) one
// real instance. Ctrl-C cancels it; the cleanup still runs.
func TestAWSContract(t *testing.T) {
	cluster := os.Getenv(envCluster)
	if cluster == "" {
		t.Skip("real-account contract suite: set " + envCluster + " (and AWS credentials) to run it")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		t.Skipf("no AWS configuration: %v", err)
	}
	if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
		t.Skipf("no AWS credentials: %v", err)
	}
	if cfg.Region == "" {
		t.Fatal("no AWS region: set AWS_REGION")
	}
	dir := os.Getenv(envConfig)
	if dir == "" {
		dir = filepath.Join("..", "..", "..", "karpenter")
	}
	nodeConfig, err := apis.Load(dir)
	if err != nil {
		t.Fatalf("configuration %s (set %s): %v", dir, envConfig, err)
	}
	err = contract.Run(ctx, contract.Options{Cluster: cluster, Region: cfg.Region, Config: nodeConfig,
		Clients: doctor.NewClients(cfg), Out: os.Stdout, Launch: true})
	if err != nil {
		t.Fatal(err)
	}
}

// The suite's own code on the local cloud: doctor, the dry-run probes
// under the deployed controller role, the launch and the termination, and
// nothing left behind.
func TestContractOnTheLocalCloud(t *testing.T) {
	e := doctortest.New(t)
	e.Deploy(t)
	var out bytes.Buffer
	err := contract.Run(context.Background(), contract.Options{Cluster: e.Cluster, Region: e.Region, Config: e.Config,
		Clients: e.Clients(t), Out: &out, Launch: true, RunningWait: time.Minute})
	t.Logf("suite output:\n%s", out.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"== 1. doctor", "spot claim of NodePool default", "on-demand claim of NodePool default",
		"IAM allows", "DryRun CreateLaunchTemplate", "launched i-", "is running", "DryRun CreateFleet from the existing launch template would succeed", "terminated i-", "cleanup: deleted launch template", "cleanup: done"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the suite's output lacks %q", want)
		}
	}
	leftovers(t, e)
}

// A signal after the launch (the context cancelled) still terminates the
// instance and deletes the templates.
func TestContractCleansUpWhenInterrupted(t *testing.T) {
	e := doctortest.New(t)
	e.Deploy(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	err := contract.Run(ctx, contract.Options{Cluster: e.Cluster, Region: e.Region, Config: e.Config,
		Clients: e.Clients(t), Out: &out, Launch: true, AfterLaunch: cancel})
	t.Logf("suite output:\n%s", out.String())
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Fatalf("an interrupted run must fail with the cancellation, got %v", err)
	}
	if !strings.Contains(out.String(), "cleanup: terminated") {
		t.Errorf("the cleanup did not terminate the instance:\n%s", out.String())
	}
	leftovers(t, e)
}

// leftovers fails the test for an instance still live or a launch
// template still there.
func leftovers(t *testing.T, e *doctortest.Env) {
	t.Helper()
	for _, i := range e.Cloud.AWS.EC2().Instances() {
		if s := string(i.State.Name); s != "shutting-down" && s != "terminated" {
			t.Errorf("instance %s is left %s", *i.InstanceId, s)
		}
	}
	lts, err := e.Clients(t).EC2.DescribeLaunchTemplates(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, lt := range lts.LaunchTemplates {
		t.Errorf("launch template %s is left", *lt.LaunchTemplateName)
	}
}
