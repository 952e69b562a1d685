package safety_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/localrun"
)

// The day of realistic trouble (issue 33): nodewright as AWS runs it
// (internal/localrun: reserved concurrency and throttles, asynchronous
// retries and event age, timeouts, cold starts, SQS event sources with
// duplicates and shuffled batches, late EventBridge events) on a local
// cloud with every simulator rule on (FIDELITY.md: request throttling,
// eventual consistency after a launch, ICE, the spot service-linked role,
// ...), while the test adds trouble at random: pod churn, deploys, spot
// reclaims in bursts, ICE waves, the spot service-linked role missing for a
// while, EC2 errors and throttling, stalled calls that run functions into
// their timeouts, lost messages. After every step it checks the five safety
// rules of TestRandomizedSafety and two of this run's own; once the trouble
// stops, the two liveness rules.
//
// make test runs 150 steps of seed 1; `make trouble` runs the day: 1,000
// steps on seeds 1 and 2 (NODEWRIGHT_TROUBLE_STEPS, NODEWRIGHT_TROUBLE_SEED).
func TestDayOfTrouble(t *testing.T) {
	steps := envInt(t, "NODEWRIGHT_TROUBLE_STEPS", 150)
	seed := envInt(t, "NODEWRIGHT_TROUBLE_SEED", 1)
	d := newTroubledDay(t, uint64(seed))
	for i := range steps {
		d.trouble(i)
		time.Sleep(troubleStepPause)
		d.checkStep(i)
		if t.Failed() {
			d.dumpTimeline()
			t.Fatalf("stopped at step %d of seed %d", i, seed)
		}
	}
	d.calm()
	d.checkLiveness()
	d.report(seed, steps)
	if t.Failed() {
		d.dumpTimeline()
	}
}

const (
	// troubleTick stands for the stack's one-minute schedule (30 times
	// faster); EC2's throttling buckets are scaled to match.
	troubleTick = 2 * time.Second
	// troubleWarning is EC2's two-minute spot warning in this run's time.
	troubleWarning = 15 * time.Second
	// troubleStepPause is the time the system runs alone between steps.
	troubleStepPause = 300 * time.Millisecond
	// stallLatency holds a stalled EC2 call past every function's timeout
	// (troubleTimeouts).
	stallLatency = 14 * time.Second
	// cordonBound is how soon after its spot warning a node must be
	// cordoned (checkWarnedNodesCordoned).
	cordonBound = 2500 * time.Millisecond
	// fleetLatency is how long CreateFleet takes to answer: seconds, not
	// the simulator's instant (aws/karpenter-provider-aws PR #3257's log
	// shows about 2.5 s between one batch's request and the next). A
	// replacement pass that launches takes at least this long, which is
	// what a drain started after the pass would lose (cordonBound).
	fleetLatency = 3 * time.Second
	// livenessBound is how long, after the trouble stops, every pod may
	// take to run, and every queue to drain.
	livenessBound = 4 * time.Minute
)

// troubleTimeouts shorten the functions' timeouts (the stack's are 40 s to
// 5 min) so that a stalled call runs one into its timeout within a step or
// two; the functions plan their work by the deadline they are given.
var troubleTimeouts = map[string]time.Duration{
	"provisioner": 12 * time.Second, "lifecycle": 12 * time.Second, "disruption": 12 * time.Second, "interruption": 10 * time.Second,
}

// troubledDay is the run: the world the safety rules check, the local run
// driving the functions, and what the trouble did.
type troubledDay struct {
	t   *testing.T
	w   *world
	sys *localrun.System
	rng *rand.Rand
	// admin is the account administrator's SQS client (lost messages, dead
	// letters); dlqs are the stack's dead-letter queues.
	admin *sqs.Client
	dlqs  []string
	// trouble counts what the test did, by kind (troubleKinds).
	counts map[string]int
	// until is the step at which a lasting fault ends (an ICE wave by
	// pool, the spot service-linked role).
	until  map[any]int
	warned map[string]*spotWarning
	// cordonTimes are the times from spot warnings to cordons.
	cordonTimes []time.Duration
	cordons     *cordonWatch
	timeline    *tailWriter
}

func newTroubledDay(t *testing.T, seed uint64) *troubledDay {
	cloud := localcloud.ForTest(t, localcloud.Options{ClusterName: "trouble", Sim: troubleSim()})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	t.Cleanup(cancel)
	dir := t.TempDir()
	yaml := strings.ReplaceAll(troubleConfig, "CLUSTER", cloud.ClusterName)
	if err := os.WriteFile(filepath.Join(dir, "trouble.yaml"), []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	tl := &tailWriter{max: 400}
	sys, err := localrun.Start(ctx, cloud, localrun.Options{ConfigDir: dir, NodeRole: "KarpenterNodeRole-" + cloud.ClusterName, Name: "trouble",
		Tick: troubleTick, RegistrationCheck: 2 * time.Second, Timeline: localrun.NewTimeline(tl, time.Now()),
		Lambda: localrun.LambdaOptions{Seed: seed, ColdStartRate: 0.1, DuplicateRate: 0.1, Timeouts: troubleTimeouts}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sys.Close)
	d := &troubledDay{t: t, sys: sys, rng: rand.New(rand.NewPCG(seed, 0x7e0b1e)), admin: sqs.NewFromConfig(cloud.AWS.ClientConfig()),
		counts: map[string]int{}, until: map[any]int{}, warned: map[string]*spotWarning{}, timeline: tl}
	d.w = newLocalRunWorld(ctx, t, cloud, sys, seed)
	d.dlqs = deadLetterQueues(ctx, t, d.admin, sys.Table)
	// Every CreateFleet answers after fleetLatency (until calm).
	cloud.AWS.InjectFault(awssim.Fault{Service: "ec2", Operation: "CreateFleet", Latency: fleetLatency})
	d.cordons = watchCordons(ctx, t, cloud)
	return d
}

// troubleSim is the simulator of the run: instances quick to start and
// stop, launched ones unknown to DescribeInstances for half a second (rule
// launch-consistency: "eventual consistency", seconds in AWS), the spot
// warning troubleWarning ahead, EC2's throttling scaled to the run's
// compressed time; every rule on (the default).
func troubleSim() awssim.Options {
	o := localcloud.Options{Sim: awssim.Options{Delays: awssim.Delays{Pending: time.Second, NodeRegistration: time.Second,
		ShuttingDown: 300 * time.Millisecond, SpotInterruption: troubleWarning, Consistency: 500 * time.Millisecond}}}
	cloudtest.CompressedTime(float64(time.Minute / troubleTick))(&o)
	return o.Sim
}

// troubleConfig is the run's NodePool and EC2NodeClass: the safety pool
// (both sizes, spot and on-demand, quick consolidation under a 30% budget).
const troubleConfig = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: trouble
spec:
  template:
    metadata:
      labels:
        nodewright.io/safety: trouble
    spec:
      requirements:
        - key: node.kubernetes.io/instance-type
          operator: In
          values: ["m5.large", "m5.xlarge"]
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["spot", "on-demand"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 2s
    budgets:
      - nodes: "30%"
  limits:
    cpu: "200"
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

// newLocalRunWorld is the world the safety rules check, for the local
// run's stack: its table, owner and store, a namespace with the workload,
// and another stack's and another autoscaler's instances.
func newLocalRunWorld(ctx context.Context, t *testing.T, cloud *localcloud.Cloud, sys *localrun.System, seed uint64) *world {
	const ns = "trouble"
	if _, err := cloud.KubeClient.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w := blankWorld(t, ctx, cloud, seed)
	w.pool, w.ns, w.table, w.owner, w.st = "trouble", ns, sys.Table, sys.Settings.Owner, sys.Provisioner.Store
	w.ec2 = ec2.NewFromConfig(cloud.AWS.ClientConfig())
	w.foreignInstances()
	w.deployment()
	t.Cleanup(w.terminateAll)
	return w
}

// checkStep checks the safety rules, and this run's two step rules.
func (d *troubledDay) checkStep(i int) {
	d.w.check(i)
	d.checkWarnedNodesCordoned()
	d.checkNoDeadLetters()
	d.checkPassesAbsorbFailures()
}
