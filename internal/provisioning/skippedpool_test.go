package provisioning

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/catalog"
)

// A NodePool whose requirements admit no value does not stop the pass:
// it is skipped with a log line, and the other pool provisions (as
// Karpenter's NewScheduler skips it, pkg/controllers/provisioning/scheduling/scheduler.go).
func TestImpossibleNodePoolDoesNotStopProvisioning(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 2, "500m", "512Mi"))
	impossible := apistest.Pool{Name: "impossible", Weight: 50, Requirements: []apistest.Req{
		apistest.In(catalog.LabelArch, "amd64"), apistest.In(catalog.LabelArch, "arm64"),
		apistest.In(catalog.LabelCapacityType, "on-demand")}}
	good := apistest.Pool{Labels: map[string]string{"team": "web"}, Requirements: []apistest.Req{
		apistest.In(catalog.LabelInstanceType, "m5.large", "m5.xlarge"), apistest.In(catalog.LabelCapacityType, "on-demand"),
		apistest.In(catalog.LabelTopologyZone, "us-west-2a", "us-west-2b")}}
	e.cfg = apistest.Load(t, apistest.Doc(impossible.YAML(), good.YAML(), apistest.NodeClass{}.YAML()))
	var logs bytes.Buffer
	p := e.provisioner()
	p.log = slog.New(slog.NewTextHandler(&logs, nil))
	res, err := p.Run(t.Context(), Trigger{Source: TriggerSchedule})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	claims := e.store.live()
	if len(res.Launched) != 1 || len(claims) != 1 || claims[0].Labels[apis.NodePoolLabelKey] != "default" {
		t.Fatalf("result %+v, claims %d", res, len(claims))
	}
	if !strings.Contains(logs.String(), `nodepool=impossible reason="its requirements on \"kubernetes.io/arch\" admit no value"`) {
		t.Errorf("no skip logged:\n%s", logs.String())
	}
}
