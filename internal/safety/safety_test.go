package safety_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/app"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// pool is the world's NodePool: both sizes, spot and on-demand, quick
// consolidation under a 30% budget.
var pool = []cloudtest.Option{
	cloudtest.PoolName("safety"), cloudtest.PoolLabel("nodewright.io/safety"),
	cloudtest.InstanceTypes("m5.large", "m5.xlarge"), cloudtest.CapacityTypes("spot", "on-demand"),
	cloudtest.PoolSpec(func(p *apistest.Pool) {
		p.ConsolidationPolicy, p.ConsolidateAfter, p.Budgets = "WhenEmptyOrUnderutilized", "2s", []apistest.Budget{{Nodes: "30%"}}
	}),
}

// budgetShare is the pool's disruption budget above.
const budgetShare = 0.30

// The rules nodewright's package docs state, checked after every step of a
// random run: never terminate what it did not launch, never act on another
// stack's resources, never launch twice for one claim, never remove a pod
// except by eviction (spot reclaims excepted), never disrupt more nodes at
// once than the budget allows.
func TestRandomizedSafety(t *testing.T) {
	steps := envInt(t, "NODEWRIGHT_SAFETY_STEPS", 200)
	seed := envInt(t, "NODEWRIGHT_SAFETY_SEED", 1)
	w := newWorld(t, uint64(seed))
	for i := range steps {
		w.step(i)
		w.check(i)
		if t.Failed() {
			t.Fatalf("stopped at step %d of seed %d", i, seed)
		}
	}
	for _, r := range w.rules {
		t.Logf("rule %q: %d checks, %d violations", r.name, r.checks, r.violations)
	}
	t.Logf("seed %d, %d steps: %d scale changes, %d spot reclaims, %d duplicate and %d lost messages, %d injected EC2 errors, %d launches, %d nodes disrupted voluntarily",
		seed, steps, w.stats.scales, w.stats.reclaims, w.stats.dups, w.stats.lost, w.stats.faults, len(w.launchedByClaim), len(w.disrupted))
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

type rule struct {
	name               string
	checks, violations int
}

type world struct {
	t     *testing.T
	ctx   context.Context
	cloud *localcloud.Cloud
	rng   *rand.Rand
	pool  string
	ns    string
	table string
	owner string
	st    *store.Store
	sqs   *sqs.Client
	work  string
	intr  string
	ec2   *ec2.Client
	fns   map[string]func(context.Context, json.RawMessage) (any, error)

	// foreign are instances of another stack and of another autoscaler for
	// the same cluster, with their tags at the start.
	foreign map[string]map[string]string
	// reclaimed nodes: the spot exception to eviction-only removal.
	reclaimedNodes map[string]bool
	// podNode remembers where every pod last ran.
	podNode map[string]string
	// launchedByClaim: instance IDs ever seen per claim tag.
	launchedByClaim map[string]map[string]bool
	// audited counts the audit events already checked.
	audited int
	// orphanSince is when a running instance of this stack was first seen
	// without a live claim.
	orphanSince map[string]time.Time

	rules []*rule
	stats struct{ scales, reclaims, dups, lost, faults int }
	// disrupted are the claims seen marked for voluntary disruption: the
	// budget rule means little if there were none.
	disrupted map[string]bool
}

func (w *world) rule(name string) *rule {
	for _, r := range w.rules {
		if r.name == name {
			return r
		}
	}
	r := &rule{name: name}
	w.rules = append(w.rules, r)
	return r
}

// violate records a violation of r (and fails the test).
func (w *world) check1(r *rule, ok bool, format string, args ...any) {
	r.checks++
	if !ok {
		r.violations++
		w.t.Errorf("rule %q violated: %s", r.name, fmt.Sprintf(format, args...))
	}
}

func newWorld(t *testing.T, seed uint64) *world {
	e := cloudtest.NewEnv(t, shared, append(pool, cloudtest.Timeout(40*time.Minute), cloudtest.WorkQueue(), cloudtest.InterruptionQueue())...)
	ctx, cloud, stack, cfg := e.Ctx, e.Cloud, e.Stack, e.Config
	w := blankWorld(t, ctx, cloud, seed)
	w.pool, w.ns, w.table, w.st, w.owner, w.work, w.intr = e.Pool, e.Namespace, e.Table, e.Store, e.Owner(), e.WorkQueue, e.InterruptionQueue
	// The functions, and the SQS event sources that feed them, run as the
	// stack's controller role; w.ec2 and w.st stay the administrator's
	// (foreign instances).
	w.sqs, w.ec2 = sqs.NewFromConfig(e.Controller()), ec2.NewFromConfig(e.AWS)
	s := settings.Settings{ClusterName: cloud.ClusterName, TableName: w.table, Owner: w.owner, WorkQueueURL: w.work,
		BatchIdle: 100 * time.Millisecond, BatchMax: time.Second, Rebalance: "ignore"}
	for _, fn := range []string{"provisioner", "lifecycle", "interruption", "disruption"} {
		a, err := app.New(ctx, s, app.Options{Function: fn, Out: &cloudtest.SyncBuffer{}, KubeREST: cloud.ControllerREST, Config: cfg, AWSCredentials: stack.Controller})
		if err != nil {
			t.Fatal(err)
		}
		h, err := a.FunctionHandler(fn)
		if err != nil {
			t.Fatal(err)
		}
		w.fns[fn] = h
	}
	w.foreignInstances()
	w.deployment()
	t.Cleanup(w.terminateAll)
	return w
}

// blankWorld is a world with nothing seen yet, its stack's fields unset.
func blankWorld(t *testing.T, ctx context.Context, cloud *localcloud.Cloud, seed uint64) *world {
	return &world{t: t, ctx: ctx, cloud: cloud, rng: rand.New(rand.NewPCG(seed, 0x5afe)),
		reclaimedNodes: map[string]bool{}, podNode: map[string]string{}, launchedByClaim: map[string]map[string]bool{},
		foreign: map[string]map[string]string{}, orphanSince: map[string]time.Time{}, disrupted: map[string]bool{}, fns: map[string]func(context.Context, json.RawMessage) (any, error){}}
}

// foreignInstances launches, for the same cluster, an instance of another
// nodewright stack (another owner) and one of another autoscaler (no
// nodewright tags): neither may ever be touched.
func (w *world) foreignInstances() {
	param, err := ssm.NewFromConfig(w.cloud.AWS.ClientConfig()).GetParameter(w.ctx, &ssm.GetParameterInput{Name: sdkaws.String(
		"/aws/service/eks/optimized-ami/" + w.cloud.AWS.Options().KubernetesVersion + "/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		w.t.Fatal(err)
	}
	lt := fmt.Sprintf("%s-foreign", w.table)
	if _, err := w.ec2.CreateLaunchTemplate(w.ctx, &ec2.CreateLaunchTemplateInput{LaunchTemplateName: &lt,
		LaunchTemplateData: &ec2types.RequestLaunchTemplateData{ImageId: param.Parameter.Value}}); err != nil {
		w.t.Fatal(err)
	}
	cluster := ec2types.Tag{Key: sdkaws.String(nwaws.ClusterTagKey(w.cloud.ClusterName)), Value: sdkaws.String("owned")}
	for _, tags := range [][]ec2types.Tag{
		{cluster, {Key: sdkaws.String(nwaws.TagManagedBy), Value: sdkaws.String(nwaws.ManagedBy)}, {Key: sdkaws.String(nwaws.TagOwner), Value: sdkaws.String("another-stack")},
			{Key: sdkaws.String(nwaws.TagNodePool), Value: sdkaws.String(w.pool)}, {Key: sdkaws.String(nwaws.TagNodeClaim), Value: sdkaws.String("theirs-1")}},
		{cluster, {Key: sdkaws.String("karpenter.sh/nodepool"), Value: sdkaws.String(w.pool)}},
	} {
		id := cloudtest.RawInstance{LaunchTemplate: lt, InstanceType: ec2types.InstanceTypeM5Large, Zone: w.cloud.Region + "a", Tags: tags}.Launch(w.ctx, w.t, w.ec2)
		w.foreign[id] = tagMap(w.instanceTags(id))
	}
}

func (w *world) deployment() {
	cloudtest.Workload{Name: "web", Replicas: 4, CPU: "700m", Memory: "512Mi", NodeSelector: map[string]string{"nodewright.io/safety": w.pool},
		GraceSeconds: new(int64(0)), MaxUnavailable: new(int32(1))}.Deploy(w.ctx, w.t, w.cloud.KubeClient, w.ns)
}

// step applies random events, then runs the functions as their triggers
// would: the schedules, and the two queues with random duplicates and
// losses.
func (w *world) step(i int) {
	w.rememberPods()
	switch r := w.rng.Float64(); {
	case r < 0.25:
		w.stats.scales++
		w.scale(w.rng.IntN(13))
	case r < 0.35:
		w.reclaimSpot()
	case r < 0.5:
		w.stats.faults++
		ops := []string{"CreateFleet", "TerminateInstances", "DescribeInstances", "CreateTags"}
		w.cloud.AWS.FailNth("ec2", ops[w.rng.IntN(len(ops))], 1+w.rng.IntN(2), "InternalError")
	}
	tick := json.RawMessage(`{"version":"0","id":"tick","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)
	w.invoke("provisioner", tick)
	w.drain("interruption", w.intr)
	w.drain("lifecycle", w.work)
	w.invoke("lifecycle", tick)
	if i%3 == 0 {
		w.invoke("disruption", tick)
	}
	w.cloud.AWS.ClearFaults()
	time.Sleep(200 * time.Millisecond)
}

func (w *world) invoke(fn string, ev json.RawMessage) (any, error) {
	res, err := w.fns[fn](w.ctx, ev)
	if err != nil {
		w.t.Logf("%s: %v", fn, err)
	}
	return res, err
}

// drain delivers what the queue holds to fn: sometimes twice (at-least-once
// delivery), sometimes not at all (a lost message); failed items stay.
func (w *world) drain(fn, url string) {
	out, err := w.sqs.ReceiveMessage(w.ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 0})
	if err != nil || len(out.Messages) == 0 {
		return
	}
	ev := events.SQSEvent{}
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, Body: *m.Body, ReceiptHandle: *m.ReceiptHandle,
			Attributes: map[string]string{"SentTimestamp": strconv.FormatInt(time.Now().UnixMilli(), 10)}})
	}
	raw, _ := json.Marshal(ev)
	failed := map[string]bool{}
	switch r := w.rng.Float64(); {
	case r < 0.05:
		w.stats.lost++ // lost: deleted unseen
	default:
		copies := 1
		if r < 0.15 {
			w.stats.dups++
			copies = 2
		}
		for range copies {
			res, err := w.invoke(fn, raw)
			if err != nil {
				return
			}
			if resp, ok := res.(events.SQSEventResponse); ok {
				for _, f := range resp.BatchItemFailures {
					failed[f.ItemIdentifier] = true
				}
			}
		}
	}
	for _, m := range out.Messages {
		if !failed[*m.MessageId] {
			_, _ = w.sqs.DeleteMessage(w.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: m.ReceiptHandle})
		}
	}
}

func (w *world) scale(n int) {
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	if _, err := w.cloud.KubeClient.AppsV1().Deployments(w.ns).Patch(w.ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		w.t.Fatal(err)
	}
}

// reclaimSpot has EC2 reclaim one of this stack's running spot instances.
func (w *world) reclaimSpot() {
	claims, err := w.st.ListNodeClaims(w.ctx)
	if err != nil {
		return
	}
	w.rng.Shuffle(len(claims), func(i, j int) { claims[i], claims[j] = claims[j], claims[i] })
	for _, cl := range claims {
		if cl.Labels[apis.CapacityTypeLabelKey] != apis.CapacityTypeSpot || cl.Status.InstanceID == "" {
			continue
		}
		if err := w.cloud.AWS.ReclaimSpot(cl.Status.InstanceID); err == nil {
			w.stats.reclaims++
			if cl.Status.NodeName != "" {
				w.reclaimedNodes[cl.Status.NodeName] = true
			}
			return
		}
	}
}

func (w *world) rememberPods() {
	list, err := w.cloud.KubeClient.CoreV1().Pods(w.ns).List(w.ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, p := range list.Items {
		if p.Spec.NodeName != "" {
			w.podNode[p.Name] = p.Spec.NodeName
		}
	}
}

// check verifies every rule against the world as it is now.
func (w *world) check(i int) {
	w.rememberPods()
	w.checkForeign()
	w.checkOneLaunchPerClaim()
	w.checkNoLeak()
	w.checkEvictionsOnly()
	w.checkBudget(i)
}

func (w *world) checkForeign() {
	r := w.rule("never touches another stack's or autoscaler's instance")
	for id, tags := range w.foreign {
		inst, _, ok := w.cloud.AWS.EC2().Instance(id)
		state := ""
		if ok && inst.State != nil {
			state = string(inst.State.Name)
		}
		now := tagMap(inst.Tags)
		w.check1(r, ok && (state == "running" || state == "pending") && fmt.Sprint(now) == fmt.Sprint(tags),
			"instance %s is %s with tags %v (were %v)", id, state, now, tags)
	}
}

func (w *world) checkOneLaunchPerClaim() {
	r := w.rule("never launches twice for one NodeClaim")
	for _, inst := range w.cloud.AWS.EC2().Instances() {
		tags := tagMap(inst.Tags)
		claim := tags[nwaws.TagNodeClaim]
		if tags[nwaws.TagOwner] != w.owner || claim == "" {
			continue
		}
		if w.launchedByClaim[claim] == nil {
			w.launchedByClaim[claim] = map[string]bool{}
		}
		w.launchedByClaim[claim][sdkaws.ToString(inst.InstanceId)] = true
	}
	for claim, ids := range w.launchedByClaim {
		w.check1(r, len(ids) == 1, "claim %s has instances %v", claim, ids)
	}
}

// leakGrace is how long an instance of this stack may run without a live
// claim: the GC grace (30 s) plus a few lifecycle passes.
const leakGrace = 90 * time.Second

// checkNoLeak: every running instance of this stack has a live claim, or
// loses it to garbage collection within leakGrace.
func (w *world) checkNoLeak() {
	r := w.rule("leaks no instance (every running one has a claim or is collected)")
	claims, err := w.st.ListNodeClaims(w.ctx)
	if err != nil {
		return
	}
	live := map[string]bool{}
	for _, cl := range claims {
		live[cl.Name] = true
	}
	now := time.Now()
	for _, inst := range w.cloud.AWS.EC2().Instances() {
		tags := tagMap(inst.Tags)
		id := sdkaws.ToString(inst.InstanceId)
		running := inst.State != nil && (inst.State.Name == ec2types.InstanceStateNameRunning || inst.State.Name == ec2types.InstanceStateNamePending)
		if tags[nwaws.TagOwner] != w.owner || !running {
			delete(w.orphanSince, id)
			continue
		}
		if live[tags[nwaws.TagNodeClaim]] {
			delete(w.orphanSince, id)
			w.check1(r, true, "")
			continue
		}
		if _, ok := w.orphanSince[id]; !ok {
			w.orphanSince[id] = now
		}
		w.check1(r, now.Sub(w.orphanSince[id]) < leakGrace, "instance %s (claim %s) has run without a claim since %s",
			id, tags[nwaws.TagNodeClaim], w.orphanSince[id].Format(time.RFC3339))
	}
}

// checkEvictionsOnly: the controllers removed pods through the Eviction API
// only, except pods of a node EC2 reclaimed.
func (w *world) checkEvictionsOnly() {
	r := w.rule("removes pods by PDB-respecting eviction only (spot reclaims excepted)")
	audit, err := w.cloud.Plane.Audit()
	if err != nil {
		w.t.Fatal(err)
	}
	for _, ev := range audit[w.audited:] {
		if ev.Namespace != w.ns || ev.Resource != "pods" || ev.Verb != "delete" && ev.Verb != "create" {
			continue
		}
		switch {
		case ev.Verb == "create" && ev.Subresource == "eviction":
			w.check1(r, true, "")
		case ev.Verb == "delete" && ev.Subresource == "":
			node := w.podNode[ev.Name]
			w.check1(r, w.reclaimedNodes[node], "pod %s on node %q deleted, not evicted (%s)", ev.Name, node, ev)
		}
	}
	w.audited = len(audit)
}

// checkBudget: voluntary disruption never takes more nodes at once than
// the NodePool's budget.
func (w *world) checkBudget(i int) {
	r := w.rule("never disrupts more nodes at once than the budget")
	claims, err := w.st.ListNodeClaims(w.ctx)
	if err != nil {
		return
	}
	voluntary := 0
	for _, cl := range claims {
		switch cl.DeletionReason() {
		case apis.DeletionReasonEmpty, apis.DeletionReasonUnderutilized, apis.DeletionReasonDrifted:
			voluntary++
			w.disrupted[cl.Name] = true
		}
	}
	allowed := int(float64(len(claims))*budgetShare + 0.999)
	w.check1(r, voluntary <= max(allowed, 1), "step %d: %d nodes disrupted of %d, budget %d", i, voluntary, len(claims), allowed)
}

func (w *world) instanceTags(id string) []ec2types.Tag {
	inst, _, ok := w.cloud.AWS.EC2().Instance(id)
	if !ok {
		w.t.Fatalf("no instance %s", id)
	}
	return inst.Tags
}

func tagMap(tags []ec2types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[sdkaws.ToString(t.Key)] = sdkaws.ToString(t.Value)
	}
	return out
}

func (w *world) terminateAll() {
	for _, inst := range w.cloud.AWS.EC2().Instances() {
		tags := tagMap(inst.Tags)
		if tags[nwaws.TagOwner] == w.owner || w.foreign[sdkaws.ToString(inst.InstanceId)] != nil {
			_ = w.cloud.AWS.EC2().Terminate(sdkaws.ToString(inst.InstanceId), "test cleanup")
		}
	}
}

var shared = cloudtest.NewShared("safety", cloudtest.SpotInterruption(3*time.Second))

func TestMain(m *testing.M) { os.Exit(shared.Main(m)) }
