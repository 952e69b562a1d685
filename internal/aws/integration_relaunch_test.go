package aws_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"

	nwaws "github.com/nodewright/nodewright/internal/aws"
)

// TestConcurrentLaunches: the provisioner launches a pass's claims at once;
// they must share discovery and launch templates and each get one instance.
func TestConcurrentLaunches(t *testing.T) {
	e := newEnv(t, false)
	nc := nodeClass("al2023@latest")
	types := e.types("c5.large", "m5.large")
	const n = 12
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: newClaim(fmt.Sprintf("burst-%d", i), in("karpenter.sh/capacity-type", "on-demand")), NodeClass: nc, InstanceTypes: types})
			ids[i], errs[i] = inst.ID, err
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil || ids[i] == "" || seen[ids[i]] {
			t.Fatalf("launch %d: %q %v", i, ids[i], errs[i])
		}
		seen[ids[i]] = true
	}
	if got := len(e.sim.Calls("ec2", "CreateFleet")); got != n {
		t.Errorf("%d CreateFleet calls for %d claims", got, n)
	}
	if lts, err := e.p.LaunchTemplates(e.ctx); err != nil || len(lts) != 1 {
		t.Errorf("launch templates after a burst: %v %+v", err, lts)
	}
}

// lossyEC2 performs CreateFleet but loses the response, as a Lambda killed
// (or a connection reset) right after the call would.
type lossyEC2 struct {
	nwaws.EC2API
	lose int
	// blind hides every instance from DescribeInstances, as EC2's eventual
	// consistency can right after a launch.
	blind bool
}

func (l *lossyEC2) DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, o ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	if l.blind {
		return &ec2.DescribeInstancesOutput{}, nil
	}
	return l.EC2API.DescribeInstances(ctx, in, o...)
}

func (l *lossyEC2) CreateFleet(ctx context.Context, in *ec2.CreateFleetInput, o ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	out, err := l.EC2API.CreateFleet(ctx, in, o...)
	if err == nil && l.lose > 0 {
		l.lose--
		return nil, errors.New("read tcp: connection reset by peer")
	}
	return out, err
}

func TestRelaunchAfterLostResponseLaunchesOnce(t *testing.T) {
	e := newEnv(t, false)
	clients := e.clients
	clients.EC2 = &lossyEC2{EC2API: e.clients.EC2, lose: 1}
	p, err := nwaws.New(nwaws.Options{ClusterName: testCluster, Region: testRegion, Owner: testOwner, Logger: quiet}, clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := nwaws.LaunchRequest{NodeClaim: newClaim("lossy-1"), NodeClass: nodeClass("bottlerocket@latest"), InstanceTypes: e.types("c5.large", "m5.large")}
	if _, err := p.Launch(e.ctx, req); err == nil {
		t.Fatal("lost response not reported")
	}
	inst, err := p.Launch(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.sim.EC2().Instances()); n != 1 {
		t.Fatalf("%d instances after a lost response and a re-launch, want 1", n)
	}
	if inst.ID != *e.sim.EC2().Instances()[0].InstanceId {
		t.Errorf("re-launch returned %s, not the instance launched first", inst.ID)
	}
	// The Bottlerocket user data went over the wire as TOML with the cluster settings.
	lt := e.sim.Calls("ec2", "CreateLaunchTemplate")[0].Params
	raw, _ := base64.StdEncoding.DecodeString(lt["LaunchTemplateData.UserData"])
	for _, want := range []string{"[settings.kubernetes]", `cluster-name = "demo"`, `"karpenter.sh/unregistered" = [":NoExecute"]`, "max-pods = 29"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("Bottlerocket user data lacks %q:\n%s", want, raw)
		}
	}
	if want, _ := e.sim.EC2().SSMParameter("/aws/service/bottlerocket/aws-k8s-1.33/x86_64/latest/image_id"); inst.ImageID != want {
		t.Errorf("image %s, want the Bottlerocket x86_64 image %s", inst.ImageID, want)
	}
}

// TestRelaunchBeforeInstanceIsVisible: the adoption check cannot see the
// instance yet, so the CreateFleet ClientToken must return the same one.
func TestRelaunchBeforeInstanceIsVisible(t *testing.T) {
	e := newEnv(t, false)
	clients := e.clients
	lossy := &lossyEC2{EC2API: e.clients.EC2, lose: 1, blind: true}
	clients.EC2 = lossy
	p, err := nwaws.New(nwaws.Options{ClusterName: testCluster, Region: testRegion, Owner: testOwner, Logger: quiet}, clients, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := nwaws.LaunchRequest{NodeClaim: newClaim("blind-1"), NodeClass: nodeClass("al2023@latest"), InstanceTypes: e.types("c5.large")}
	if _, err := p.Launch(e.ctx, req); err == nil {
		t.Fatal("lost response not reported")
	}
	inst, err := p.Launch(e.ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	fleets := e.sim.Calls("ec2", "CreateFleet")
	if n := len(e.sim.EC2().Instances()); n != 1 || len(fleets) != 2 || fleets[0].Params["ClientToken"] != fleets[1].Params["ClientToken"] {
		t.Fatalf("%d instances from %d CreateFleet calls, want 1 instance from one token", n, len(fleets))
	}
	if inst.ID != *e.sim.EC2().Instances()[0].InstanceId {
		t.Errorf("re-launch returned %s, not the instance launched first", inst.ID)
	}
}
