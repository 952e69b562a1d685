package doctor_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/doctor"
	"github.com/nodewright/nodewright/internal/doctor/doctortest"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localrun"
)

// Doctor on the whole local deployment `nodewright local up --config`
// and `make demo` run (internal/localrun: a real control plane, dynalite,
// the table, queues and roles of the stack, every function running): every
// check passes.
func TestDoctorOnALocalRun(t *testing.T) {
	cloud := localcloud.ForTest(t, localcloud.Options{})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "default.yaml"), []byte(strings.ReplaceAll(doctortest.Config, "CLUSTER", cloud.ClusterName)), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	sys, err := localrun.Start(ctx, cloud, localrun.Options{ConfigDir: dir, NodeRole: "KarpenterNodeRole-" + cloud.ClusterName, Name: "doctor"})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	cfg, err := apis.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// The account administrator's credentials (the functions' environment
	// holds the controllers' own): doctor runs as the user.
	r, err := doctor.Run(ctx, doctor.Options{Cluster: cloud.ClusterName, Region: cloud.Region, Config: cfg}, doctor.NewClients(cloud.AWS.ClientConfig()))
	if err != nil {
		t.Fatal(err)
	}
	noFailure(t, r)
	for _, name := range []string{"stack", "access-entries", "iam/controller", "iam/webhook", "iam/registrar", "cluster"} {
		mustStatus(t, r, name, doctor.Pass, "")
	}
	if r.Outputs["TableName"] != sys.Table {
		t.Errorf("the stack's table output is %q, the deployment's table %q", r.Outputs["TableName"], sys.Table)
	}
}
