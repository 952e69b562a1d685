package provisioning

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/scheduling"
)

func TestClaimName(t *testing.T) {
	a := ClaimName("default", 7, 0, []string{"u1", "u2", "u3"})
	if b := ClaimName("default", 7, 0, []string{"u3", "u1", "u2"}); a != b {
		t.Errorf("pod order changed the name: %s vs %s", a, b)
	}
	if !strings.HasPrefix(a, "default-") || len(a) != len("default-")+10 {
		t.Errorf("name %q: want default-<10 chars>", a)
	}
	for _, other := range []string{
		ClaimName("default", 8, 0, []string{"u1", "u2", "u3"}),
		ClaimName("default", 7, 1, []string{"u1", "u2", "u3"}),
		ClaimName("default", 7, 0, []string{"u1", "u2"}),
		ClaimName("other", 7, 0, []string{"u1", "u2", "u3"}),
	} {
		if other == a {
			t.Errorf("distinct inputs gave the same name %s", a)
		}
	}
}

func TestRunCreatesLaunchesAndRecords(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 3, "500m", "512Mi"))
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 1 || len(res.Launched) != 1 || res.Nominated != 3 || res.Pending != 3 {
		t.Fatalf("result %+v", res)
	}
	claims := e.store.live()
	if len(claims) != 1 {
		t.Fatalf("want 1 claim, got %d", len(claims))
	}
	cl := claims[0]
	inst := e.launcher.instances[cl.Name]
	if !cl.IsTrue(apis.ConditionLaunched) || cl.Status.InstanceID != inst.ID || cl.Status.ProviderID != "aws:///"+inst.Zone+"/"+inst.ID ||
		cl.Status.ImageID != "ami-1" || cl.Annotations[AnnotationLaunchTemplate] != "lt-1" {
		t.Errorf("launch not recorded: status %+v annotations %v", cl.Status, cl.Annotations)
	}
	if cl.Labels[catalog.LabelInstanceType] != inst.Type || cl.Labels[catalog.LabelTopologyZone] != inst.Zone ||
		cl.Labels[apis.CapacityTypeLabelKey] != "on-demand" || cl.Labels[apis.NodePoolLabelKey] != "default" ||
		cl.Labels["team"] != "web" || cl.Labels[catalog.LabelInstanceFamily] != "m5" {
		t.Errorf("labels %v", cl.Labels)
	}
	if cl.Status.Allocatable.Cpu().IsZero() || cl.Status.Capacity.Cpu().IsZero() {
		t.Errorf("capacity/allocatable not recorded: %+v", cl.Status)
	}
	if cl.Annotations[AnnotationRun] == "" || cl.NodePoolHash == "" || cl.NodeClassHash == "" || cl.Spec.NodeClassRef == nil {
		t.Errorf("provenance missing: %v %q %q", cl.Annotations, cl.NodePoolHash, cl.NodeClassHash)
	}
	if req := cl.Spec.Resources.Requests.Cpu(); req.MilliValue() < 1500 {
		t.Errorf("requests %v: want at least the pods' 1500m", cl.Spec.Resources.Requests)
	}
	nom := e.cluster.eventsWith(ReasonNominated)
	if len(nom) != 3 {
		t.Fatalf("want 3 Nominated events, got %v", nom)
	}
	for _, ev := range nom {
		if !strings.Contains(ev.Message, "nodeclaim/"+cl.Name) || !strings.Contains(ev.Message, inst.Type) || !strings.Contains(ev.Message, inst.Zone) {
			t.Errorf("Nominated message %q lacks claim/type/zone", ev.Message)
		}
	}
	// The last completed run is recorded for the stale-nudge check.
	kv, err := e.store.GetKV(context.Background(), LastRunKey)
	if err != nil {
		t.Fatal(err)
	}
	var lr lastRun
	if err := json.Unmarshal(kv.Value, &lr); err != nil || lr.StartedAt.IsZero() || lr.Token != 1 {
		t.Errorf("last run %s (%v)", kv.Value, err)
	}
}

// Pods waiting for a booting node never cause a second node.
func TestSecondRunLaunchesNothing(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 3, "500m", "512Mi"))
	e.run(Trigger{Source: TriggerSchedule})
	calls := e.launcher.callCount()
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 0 || e.launcher.callCount() != calls {
		t.Fatalf("second run created %v and launched %d more", res.Created, e.launcher.callCount()-calls)
	}
	if res.Nominated != 3 {
		t.Errorf("want the pods nominated to the in-flight claim again, got %d", res.Nominated)
	}
	if n := len(e.store.live()); n != 1 {
		t.Errorf("want 1 claim, got %d", n)
	}
	// More pods than the in-flight claim holds: exactly the overflow gets a claim.
	e.cluster.snap.PendingPods = append(e.cluster.snap.PendingPods, pods("more", 20, "1", "1Gi")...)
	res = e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) == 0 {
		t.Fatal("overflow pods got no claim")
	}
	if res.Unschedulable != 0 {
		t.Errorf("unschedulable %d", res.Unschedulable)
	}
}

func TestLimitsIncludeInFlightClaims(t *testing.T) {
	// 4 CPUs: one m5.xlarge (4) or two m5.large (2 each).
	e := newEnv(t, poolOpts{types: []string{"m5.large"}, limits: map[string]string{"cpu": "4"}}, pods("web", 3, "1", "1Gi"))
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 2 {
		t.Fatalf("want two m5.large claims under the 4-CPU limit, got %v (unschedulable %d)", res.Created, res.Unschedulable)
	}
	// Six more pods: the limit is used up by the in-flight claims.
	e.cluster.snap.PendingPods = append(e.cluster.snap.PendingPods, pods("more", 6, "1", "1Gi")...)
	res = e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 0 {
		t.Fatalf("limit exceeded: created %v", res.Created)
	}
	failed := e.cluster.eventsWith(ReasonFailedScheduling)
	if len(failed) == 0 || !strings.Contains(failed[0].Message, "limit") {
		t.Fatalf("want FailedScheduling events naming the limit, got %v", failed)
	}
}

func TestStaleNudgesAndHeldLease(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 1, "100m", "128Mi"))
	before := e.clock.Now().Add(-time.Second)
	e.run(Trigger{Source: TriggerSchedule})
	res := e.run(Trigger{Source: TriggerNudge, Nudges: []time.Time{before}})
	if res.Skipped != "stale nudges" {
		t.Fatalf("nudge sent before the last run started: want skipped, got %+v", res)
	}
	// One fresh nudge in the batch makes it run.
	res = e.run(Trigger{Source: TriggerNudge, Nudges: []time.Time{before, e.clock.Now().Add(time.Second)}})
	if res.Skipped != "" {
		t.Fatalf("fresh nudge skipped: %+v", res)
	}
	// A lease held by another holder: return at once, do nothing.
	if _, err := e.store.AcquireLease(context.Background(), LeaseName, "someone-else", time.Minute); err != nil {
		t.Fatal(err)
	}
	calls := len(e.store.calls)
	res = e.run(Trigger{Source: TriggerSchedule})
	if res.Skipped != "lease held" {
		t.Fatalf("want lease held, got %+v", res)
	}
	for _, c := range e.store.calls[calls:] {
		if c != "AcquireLease" {
			t.Errorf("store call %s while the lease is held", c)
		}
	}
}

// TestNudgeKeptWhileTheLeaseIsHeld: a nudge that finds another run holding
// the lease comes back after LeaseHeldDelay with its own send time (that
// run's snapshot may predate what the nudge is about); a scheduled run
// sends nothing (the next tick comes anyway).
func TestNudgeKeptWhileTheLeaseIsHeld(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 1, "100m", "128Mi"))
	p := e.provisioner()
	type sent struct {
		msg   queue.Message
		delay time.Duration
	}
	var nudges []sent
	p.d.Nudge = func(_ context.Context, msg queue.Message, d time.Duration) error {
		nudges = append(nudges, sent{msg, d})
		return nil
	}
	if _, err := e.store.AcquireLease(context.Background(), LeaseName, "someone-else", time.Minute); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Run(context.Background(), Trigger{Source: TriggerSchedule}); err != nil || res.Skipped != "lease held" || len(nudges) != 0 {
		t.Fatalf("scheduled run: %+v, %v, nudges %v; want skipped, nothing sent", res, err, nudges)
	}
	sentAt := e.clock.Now().Add(-time.Second)
	res, err := p.Run(context.Background(), Trigger{Source: TriggerNudge, Nudges: []time.Time{sentAt.Add(-time.Second), sentAt}})
	if err != nil || res.Skipped != "lease held" {
		t.Fatalf("nudged run: %+v, %v; want skipped", res, err)
	}
	if len(nudges) != 1 || nudges[0].msg.Kind != queue.KindProvision || !nudges[0].msg.SentAt.Equal(sentAt) || nudges[0].delay != 5*time.Second {
		t.Fatalf("nudges %+v; want one provision nudge sent at %v, delayed 5s", nudges, sentAt)
	}
}

// Spot short everywhere: the claim is deleted and its pods re-planned onto
// on-demand in the same run.
func TestCapacityErrorReplansInSameRun(t *testing.T) {
	e := newEnv(t, poolOpts{types: []string{"m5.large"}, ct: []string{"spot", "on-demand"}}, pods("web", 2, "500m", "512Mi"))
	for _, z := range []string{"us-west-2a", "us-west-2b"} {
		e.launcher.ice[scheduling.OfferingKey{InstanceType: "m5.large", Zone: z, CapacityType: "spot"}] = true
	}
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.CapacityFailed) != 1 || len(res.Launched) != 1 || res.Rounds != 2 {
		t.Fatalf("want one capacity failure then one launch in round 2, got %+v", res)
	}
	claims := e.store.live()
	if len(claims) != 1 || claims[0].Labels[apis.CapacityTypeLabelKey] != "on-demand" {
		t.Fatalf("want one on-demand claim, got %v", claims)
	}
	dead := e.store.tombstone(res.CapacityFailed[0])
	if dead == nil {
		t.Fatalf("spot claim %s not tombstoned", res.CapacityFailed[0])
	}
	if c := dead.Condition(apis.ConditionLaunched); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "InsufficientCapacity" {
		t.Errorf("tombstone condition %+v", c)
	}
	if claims[0].Name == dead.Name {
		t.Error("re-planned claim reused the failed claim's name")
	}
	if got := len(e.cluster.eventsWith(ReasonNominated)); got != 2 {
		t.Errorf("want 2 Nominated events (to the on-demand claim), got %d", got)
	}
}

// Re-planning keeps the room this run already gave other pods: the claim
// that launched is full, so the failed claim's pods need a new one.
func TestReplanRespectsThisRunsPlacements(t *testing.T) {
	// Five 750m pods that must run on-demand nearly fill an on-demand
	// m5.xlarge (3920m allocatable); three flexible 200m pods overflow to a
	// claim that prefers spot, and spot is short everywhere.
	onDemand := pods("od", 5, "750m", "256Mi")
	for _, p := range onDemand {
		p.Spec.NodeSelector = map[string]string{apis.CapacityTypeLabelKey: "on-demand"}
	}
	e := newEnv(t, poolOpts{types: []string{"m5.xlarge"}, ct: []string{"spot", "on-demand"}}, append(onDemand, pods("flex", 3, "200m", "256Mi")...))
	for _, z := range []string{"us-west-2a", "us-west-2b"} {
		e.launcher.ice[scheduling.OfferingKey{InstanceType: "m5.xlarge", Zone: z, CapacityType: "spot"}] = true
	}
	res := e.run(Trigger{Source: TriggerSchedule})
	if res.Unschedulable != 0 || len(res.CapacityFailed) != 1 || res.Rounds != 2 {
		t.Fatalf("result %+v", res)
	}
	live := e.store.live()
	if len(live) != 2 {
		t.Fatalf("want the full claim plus a new one for the overflow, got %d claims", len(live))
	}
	total := int64(0)
	for _, cl := range live {
		total += cl.Status.Allocatable.Cpu().MilliValue()
	}
	if total < 5*750+3*200 {
		t.Fatalf("claims hold %dm CPU for 4350m of pods", total)
	}
}

func TestTransientLaunchErrorsRetried(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 1, "100m", "128Mi"))
	boom := errors.New("RequestLimitExceeded")
	e.launcher.failNext = []error{boom, boom}
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Launched) != 1 || e.launcher.callCount() != 3 {
		t.Fatalf("want launch on the third attempt, got %+v after %d calls", res, e.launcher.callCount())
	}
	// Persistent failure: the claim stays, unlaunched, with the reason; the
	// next run resumes it (and nothing else is planned for its pods).
	e2 := newEnv(t, poolOpts{}, pods("web", 1, "100m", "128Mi"))
	e2.launcher.failNext = []error{boom, boom, boom}
	res = e2.run(Trigger{Source: TriggerSchedule})
	if len(res.Failed) != 1 {
		t.Fatalf("want one failed claim, got %+v", res)
	}
	cl := e2.store.live()[0]
	if c := cl.Condition(apis.ConditionLaunched); c == nil || c.Status != metav1.ConditionUnknown || !strings.Contains(c.Message, "RequestLimitExceeded") {
		t.Errorf("condition %+v", c)
	}
	res = e2.run(Trigger{Source: TriggerSchedule})
	if len(res.Resumed) != 1 || res.Resumed[0] != cl.Name || len(res.Created) != 0 {
		t.Fatalf("want the failed claim resumed and nothing new, got %+v", res)
	}
	if live := e2.store.live(); len(live) != 1 || !live[0].IsTrue(apis.ConditionLaunched) {
		t.Fatalf("claims %v", live)
	}
}

// A crash after CreateFleet but before the launch was recorded: the next run
// adopts the instance through the claim instead of launching another.
func TestCrashAfterLaunchIsResumed(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 2, "500m", "512Mi"))
	ctx, cancel := context.WithCancel(context.Background())
	p := e.provisioner()
	p.d.Launcher = launcherFunc(func(c context.Context, req nwaws.LaunchRequest) (nwaws.Instance, error) {
		inst, err := e.launcher.Launch(c, req)
		cancel() // the process dies with CreateFleet's answer in flight
		if err != nil {
			return inst, err
		}
		return nwaws.Instance{}, context.Canceled
	})
	if _, err := p.Run(ctx, Trigger{Source: TriggerSchedule}); err == nil {
		t.Fatal("crashed run reported success")
	}
	if len(e.launcher.instances) != 1 {
		t.Fatalf("instances %v", e.launcher.instances)
	}
	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Resumed) != 1 || len(res.Created) != 0 || len(e.launcher.instances) != 1 {
		t.Fatalf("re-run: %+v, instances %d", res, len(e.launcher.instances))
	}
	cl := e.store.live()[0]
	if !cl.IsTrue(apis.ConditionLaunched) || cl.Status.InstanceID != e.launcher.instances[cl.Name].ID {
		t.Errorf("resumed claim not recorded: %+v", cl.Status)
	}
}

// Only the first launch of a claim this run created skips the launcher's
// look for an instance tagged with it: a retry and a resumed claim (its
// instance may exist) look first.
func TestOnlyAFirstLaunchOfANewClaimIsNew(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 1, "100m", "128Mi"))
	e.launcher.failNext = []error{errors.New("RequestLimitExceeded")}
	if res := e.run(Trigger{Source: TriggerSchedule}); len(res.Launched) != 1 {
		t.Fatalf("result %+v", res)
	}
	if want := []bool{true, false}; !slices.Equal(e.launcher.fresh, want) {
		t.Errorf("New per launch call %v, want %v", e.launcher.fresh, want)
	}
	e2 := newEnv(t, poolOpts{}, pods("web", 1, "100m", "128Mi"))
	e2.launcher.failNext = []error{errors.New("boom"), errors.New("boom"), errors.New("boom")}
	e2.run(Trigger{Source: TriggerSchedule})
	if res := e2.run(Trigger{Source: TriggerSchedule}); len(res.Resumed) != 1 {
		t.Fatalf("result %+v", res)
	}
	if want := []bool{true, false, false, false}; !slices.Equal(e2.launcher.fresh, want) {
		t.Errorf("New per launch call %v, want %v", e2.launcher.fresh, want)
	}
}

// The lifecycle's registration checks of a round's launches go in one
// batch, after the launches, with the registration delay.
func TestLaunchRequeuesSentTogether(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 40, "1", "1Gi"))
	p := e.provisioner()
	var batches [][]queue.Message
	p.d.RequeueBatch = func(_ context.Context, msgs []queue.Message, delay time.Duration) error {
		if delay != 30*time.Second {
			t.Errorf("delay %s", delay)
		}
		batches = append(batches, msgs)
		return nil
	}
	res, err := p.Run(context.Background(), Trigger{Source: TriggerSchedule})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Launched) < 2 || len(batches) != 1 || len(batches[0]) != len(res.Launched) {
		t.Fatalf("%d launched, requeue batches %v", len(res.Launched), batches)
	}
	for _, m := range batches[0] {
		if m.Kind != queue.KindLifecycle || m.Reason != "launched" || !slices.Contains(res.Launched, m.Subject) {
			t.Errorf("requeue %+v", m)
		}
	}
}

type launcherFunc func(context.Context, nwaws.LaunchRequest) (nwaws.Instance, error)

func (f launcherFunc) Launch(ctx context.Context, r nwaws.LaunchRequest) (nwaws.Instance, error) {
	return f(ctx, r)
}

func TestUnschedulableEvents(t *testing.T) {
	huge := pod("huge", "500", "1Gi")
	e := newEnv(t, poolOpts{}, []*corev1.Pod{huge})
	res := e.run(Trigger{Source: TriggerSchedule})
	if res.Unschedulable != 1 || len(res.Created) != 0 {
		t.Fatalf("result %+v", res)
	}
	evs := e.cluster.eventsWith(ReasonFailedScheduling)
	if len(evs) != 1 || evs[0].Type != corev1.EventTypeWarning || !strings.HasPrefix(evs[0].Message, "Failed to schedule pod, ") {
		t.Fatalf("events %v", evs)
	}
}

func TestBatchingWindow(t *testing.T) {
	// A pod appears at every listing until the 6th: the window closes one
	// idle period after the last new pod.
	e := newEnv(t, poolOpts{}, nil)
	e.settings = Settings{BatchIdle: time.Second, BatchMax: 10 * time.Second, BatchPoll: 200 * time.Millisecond}
	all := pods("burst", 6, "100m", "128Mi")
	e.cluster.pending = func(n int) []*corev1.Pod { return all[:min(n+1, len(all))] }
	p := e.provisioner()
	start := e.clock.Now()
	n, last, err := p.batch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	took := e.clock.Now().Sub(start)
	// New pods at t=0,0.2,...,1.0; idle from 1.0 closes at 2.0.
	if n != 6 || took != 2*time.Second {
		t.Fatalf("batched %d pods in %s, want 6 in 2s", n, took)
	}
	// The pass plans from the last listing.
	if len(last.PendingPods) != 6 {
		t.Fatalf("last listing holds %d pending pods, want 6", len(last.PendingPods))
	}
	// A steady trickle never goes idle: BatchMax closes the window.
	e.cluster.lists = 0
	e.cluster.pending = func(n int) []*corev1.Pod { return pods("trickle", n+1, "100m", "128Mi") }
	start = e.clock.Now()
	if _, _, err := p.batch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := e.clock.Now().Sub(start); took != 10*time.Second {
		t.Fatalf("trickle window %s, want BatchMax 10s", took)
	}
	// Nothing pending: no window at all.
	e.cluster.pending = func(int) []*corev1.Pod { return nil }
	start = e.clock.Now()
	if n, _, _ := p.batch(context.Background()); n != 0 || e.clock.Now() != start {
		t.Fatalf("empty batch waited %s", e.clock.Now().Sub(start))
	}
}

func TestHandlerEvents(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 1, "100m", "128Mi"))
	h := &Handler{P: e.provisioner()}
	good, _ := json.Marshal(queue.Message{Kind: queue.KindProvision, Subject: "ns/web-0", SentAt: e.clock.Now()})
	wrongKind, _ := json.Marshal(queue.Message{Kind: queue.KindLifecycle, Subject: "x"})
	sqsEvent, _ := json.Marshal(map[string]any{"Records": []map[string]any{
		{"messageId": "m1", "body": string(good), "eventSource": "aws:sqs"},
		{"messageId": "m2", "body": "{not json", "eventSource": "aws:sqs"},
		{"messageId": "m3", "body": string(wrongKind), "eventSource": "aws:sqs"},
	}})
	out, err := h.Handle(context.Background(), sqsEvent)
	if err != nil {
		t.Fatal(err)
	}
	resp, _ := json.Marshal(out)
	if string(resp) != `{"batchItemFailures":[{"itemIdentifier":"m2"},{"itemIdentifier":"m3"}]}` {
		t.Errorf("response %s", resp)
	}
	if len(e.store.live()) != 1 {
		t.Errorf("the good nudge did not provision")
	}
	sched := []byte(`{"version":"0","id":"x","detail-type":"Scheduled Event","source":"aws.events","time":"2026-11-22T00:00:00Z","detail":{}}`)
	out, err = h.Handle(context.Background(), sched)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.(*Result); !ok {
		t.Errorf("schedule answer %T", out)
	}
	if _, err := h.Handle(context.Background(), []byte(`{"detail-type":"EC2 Spot Instance Interruption Warning"}`)); err == nil {
		t.Error("unrelated event accepted")
	}
	if _, err := h.Handle(context.Background(), []byte(`[1,2]`)); err == nil {
		t.Error("malformed event accepted")
	}
}

// oldNode puts a ready 2-CPU node "old" of the default pool, with spec and
// two 500m pods of app web bound to it, in the env's snapshot.
func (e *env) oldNode(spec corev1.NodeSpec) *corev1.Node {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "old", Labels: map[string]string{apis.NodePoolLabelKey: "default", "team": "web"}},
		Spec:       spec,
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	e.cluster.snap.Nodes = []*corev1.Node{node}
	for _, p := range pods("web", 2, "500m", "512Mi") {
		p.Spec.NodeName, p.Status = "old", corev1.PodStatus{Phase: corev1.PodRunning}
		e.cluster.snap.PodsByNode["old"] = append(e.cluster.snap.PodsByNode["old"], p)
	}
	return node
}

// Pods of a node being drained get their capacity before they are evicted
// (Karpenter's provisioner does the same), and only once.
func TestDeletingNodePodsGetCapacity(t *testing.T) {
	e := newEnv(t, poolOpts{}, nil)
	e.oldNode(corev1.NodeSpec{Taints: []corev1.Taint{{Key: apis.DisruptedTaintKey, Effect: corev1.TaintEffectNoSchedule}}})
	daemon := pod("agent", "100m", "64Mi")
	daemon.Spec.NodeName, daemon.OwnerReferences = "old", []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent"}}
	e.cluster.snap.PodsByNode["old"] = append(e.cluster.snap.PodsByNode["old"], daemon)

	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Launched) != 1 || res.Nominated != 2 {
		t.Fatalf("want one claim for the two workload pods, got %+v", res)
	}
	if res := e.run(Trigger{Source: TriggerSchedule}); len(res.Created) != 0 {
		t.Fatalf("second run created %v", res.Created)
	}
	if e.cluster.boundReads != 2 {
		t.Errorf("%d of the two runs read the bound pods (nothing pending, a node going away: both must)", e.cluster.boundReads)
	}
}

// A node whose claim is being disrupted (the disruption function marks the
// claim before it taints the Node) has its pods' capacity found as well:
// with nothing pending, the pass reads the bound pods because of the claim
// alone.
func TestDisruptingClaimsPodsGetCapacity(t *testing.T) {
	e := newEnv(t, poolOpts{}, nil)
	node := e.oldNode(corev1.NodeSpec{ProviderID: "aws:///us-west-2a/i-old"})
	cl := &apis.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-old", Labels: map[string]string{apis.NodePoolLabelKey: "default"}}}
	cl.Status.ProviderID, cl.Status.NodeName = node.Spec.ProviderID, node.Name
	cl.SetCondition(apis.ConditionLaunched, metav1.ConditionTrue, "Launched", "", metav1.Now())
	cl.SetCondition(apis.ConditionDisrupting, metav1.ConditionTrue, "Underutilized", "", metav1.Now())
	if err := e.store.CreateNodeClaim(context.Background(), cl); err != nil {
		t.Fatal(err)
	}

	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Launched) != 1 || res.Nominated != 2 {
		t.Fatalf("want one claim for the disrupting node's two pods, got %+v", res)
	}
	if e.cluster.boundReads != 1 {
		t.Errorf("%d bound-pod reads; a disrupting claim needs its pods read", e.cluster.boundReads)
	}
}

// A pod the batch window listed pending and the snapshot, read after, finds
// bound takes its room once, on its node. Counted also as pending, it left
// the other pending pod no room there and launched a node for nothing (a
// flake of scenario 5: a third m5.2xlarge for 8 pods that had two nodes).
func TestPodBoundAfterTheBatchIsNotPlacedAgain(t *testing.T) {
	a, b := pod("a", "1", "512Mi"), pod("b", "900m", "512Mi")
	e := newEnv(t, poolOpts{}, []*corev1.Pod{a, b})
	e.cluster.snap.Nodes = []*corev1.Node{{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{apis.NodePoolLabelKey: "default", "team": "web"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("29")},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}}
	bound := a.DeepCopy()
	bound.Spec.NodeName, bound.Status = "n1", corev1.PodStatus{Phase: corev1.PodRunning}
	e.cluster.snap.PodsByNode["n1"] = []*corev1.Pod{bound}

	res := e.run(Trigger{Source: TriggerSchedule})
	if len(res.Created) != 0 || len(res.Launched) != 0 {
		t.Fatalf("launched %v for pods that fit on n1", res.Launched)
	}
	if res.Nominated != 1 {
		t.Errorf("nominated %d pods, want b only", res.Nominated)
	}
}

// A steady tick (nothing pending, no node going away) reads nodes and
// claims but not the bound pods: at 40,000 pods they were most of what the
// provisioner's scheduled run cost the API server.
func TestSteadyRunReadsNoBoundPods(t *testing.T) {
	e := newEnv(t, poolOpts{}, pods("web", 3, "500m", "512Mi"))
	e.run(Trigger{Source: TriggerSchedule})
	reads := e.cluster.boundReads
	e.cluster.snap.PendingPods = nil
	if res := e.run(Trigger{Source: TriggerSchedule}); len(res.Created) != 0 {
		t.Fatalf("steady run created %v", res.Created)
	}
	if e.cluster.boundReads != reads {
		t.Errorf("the steady run read the bound pods %d times", e.cluster.boundReads-reads)
	}
}
