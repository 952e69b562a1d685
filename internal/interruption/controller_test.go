package interruption

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/kube"
	"github.com/nodewright/nodewright/internal/metrics"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/store/storetest"
	"github.com/nodewright/nodewright/internal/termination"
)

// Pure unit tests over in-memory fakes; the end-to-end behaviour on the
// local cloud is in integration_test.go.

// memStore is the shared in-memory store (internal/store/storetest, held to
// the DynamoDB store's contract) counting claim writes and instance lookups.
type memStore struct {
	*storetest.Store
	mu      sync.Mutex
	writes  int
	lookups int
	// indexLag makes the by-instance index miss every claim, as a GSI read
	// can right after the claim's instance ID was written.
	indexLag bool
}

func newMemStore(claims ...*apis.NodeClaim) *memStore {
	s := &memStore{Store: storetest.New()}
	s.Seed(claims...)
	return s
}

func (s *memStore) GetNodeClaimByInstanceID(ctx context.Context, id string) (*apis.NodeClaim, error) {
	s.mu.Lock()
	s.lookups++
	lag := s.indexLag
	s.mu.Unlock()
	if lag {
		return nil, fmt.Errorf("get nodeclaim by instance %s: %w", id, store.ErrNotFound)
	}
	return s.Store.GetNodeClaimByInstanceID(ctx, id)
}

func (s *memStore) MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	cl, err := s.Store.MutateNodeClaim(ctx, name, fn)
	if err == nil {
		s.mu.Lock()
		s.writes++
		s.mu.Unlock()
	}
	return cl, err
}

// fakeTerminator taints the node like the first termination step does.
type fakeTerminator struct {
	mu    sync.Mutex
	steps []string
	kc    *kube.Client
}

func (f *fakeTerminator) Step(ctx context.Context, cl *apis.NodeClaim) (termination.Result, error) {
	f.mu.Lock()
	f.steps = append(f.steps, cl.Name)
	f.mu.Unlock()
	if !cl.Deleting() {
		return termination.Result{}, errors.New("not marked")
	}
	if _, err := f.kc.AddTaint(ctx, cl.Status.NodeName, termination.DisruptedTaint()); err != nil {
		return termination.Result{}, err
	}
	return termination.Result{Node: cl.Status.NodeName, Phase: termination.PhaseDraining, RequeueAfter: time.Second}, nil
}

type fakeCloud struct{ terminated []string }

func (f *fakeCloud) InvisibleLongEnough(time.Time, time.Time) bool { return true }

func (f *fakeCloud) Terminate(_ context.Context, ids ...string) error {
	f.terminated = append(f.terminated, ids...)
	return nil
}

// fakeInstances is EC2's view of instances: their tags and whose they are.
type fakeInstances struct {
	byID  map[string]nwaws.Instance
	owned map[string]bool
	calls int
}

func (f *fakeInstances) GetInstance(_ context.Context, id string) (nwaws.Instance, error) {
	f.calls++
	if i, ok := f.byID[id]; ok {
		return i, nil
	}
	return nwaws.Instance{}, fmt.Errorf("describe instance %s: %w", id, nwaws.ErrInstanceNotFound)
}

func (f *fakeInstances) Owns(i nwaws.Instance) bool { return f.owned[i.ID] }

type fakeICE struct{ keys []nwaws.OfferingKey }

func (f *fakeICE) MarkUnavailable(_ context.Context, k nwaws.OfferingKey, _ string) error {
	f.keys = append(f.keys, k)
	return nil
}

type fixture struct {
	st       *memStore
	cs       *k8sfake.Clientset
	kc       *kube.Client
	term     *fakeTerminator
	cloud    *fakeCloud
	ice      *fakeICE
	ec2      *fakeInstances
	passes   int
	passFn   func(n int) (provisioning.Result, error)
	passCtx  context.Context // the last pass's
	requeued []queue.Message
	logs     *bytes.Buffer
	metrics  *bytes.Buffer
	h        *Handler
}

const (
	instanceID = "i-0123456789abcdef0"
	claimName  = "default-abcde"
	nodeName   = "ip-10-0-0-1.ec2.internal"
)

func newFixture(t *testing.T, rebalance string) *fixture {
	t.Helper()
	return newFixtureWith(t, rebalance, nil)
}

// newFixtureWith is newFixture with its Deps changed by change first.
func newFixtureWith(t *testing.T, rebalance string, change func(*Deps)) *fixture {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}, Spec: corev1.NodeSpec{ProviderID: "aws:///us-west-2a/" + instanceID}}
	f := &fixture{
		st: newMemStore(&apis.NodeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claimName, Labels: map[string]string{
				apis.NodePoolLabelKey: "default", catalog.LabelInstanceType: "m5.large", catalog.LabelTopologyZone: "us-west-2a",
				apis.CapacityTypeLabelKey: apis.CapacityTypeSpot,
			}},
			Status: apis.NodeClaimStatus{InstanceID: instanceID, ProviderID: node.Spec.ProviderID, NodeName: nodeName},
		}),
		cs:      k8sfake.NewSimpleClientset(node),
		cloud:   &fakeCloud{},
		ice:     &fakeICE{},
		ec2:     &fakeInstances{byID: map[string]nwaws.Instance{}, owned: map[string]bool{}},
		logs:    &bytes.Buffer{},
		metrics: &bytes.Buffer{},
	}
	f.kc = kube.NewClientFromClientset(f.cs, nil)
	f.term = &fakeTerminator{kc: f.kc}
	f.passFn = func(int) (provisioning.Result, error) {
		return provisioning.Result{Launched: []string{"default-repl"}}, nil
	}
	d := Deps{
		Store: f.st, Cluster: f.kc, Terminator: f.term, Cloud: f.cloud, ICE: f.ice, Instances: f.ec2,
		Provision: func(ctx context.Context) (provisioning.Result, error) {
			f.passes++
			f.passCtx = ctx
			return f.passFn(f.passes)
		},
		Requeue: func(_ context.Context, m queue.Message, _ time.Duration) error {
			f.requeued = append(f.requeued, m)
			return nil
		},
		Metrics:  metrics.New(f.metrics, nil),
		Log:      slog.New(slog.NewJSONHandler(f.logs, nil)),
		Sleep:    func(context.Context, time.Duration) error { return nil },
		Settings: Settings{Rebalance: rebalance, ProvisionWait: 50 * time.Millisecond, ProvisionRetry: time.Millisecond},
	}
	if change != nil {
		change(&d)
	}
	h, err := NewHandler(d)
	if err != nil {
		t.Fatal(err)
	}
	f.h = h
	return f
}

func (f *fixture) handle(t *testing.T, bodies ...string) events.SQSEventResponse {
	t.Helper()
	return f.handleCtx(t, context.Background(), bodies...)
}

func (f *fixture) handleCtx(t *testing.T, ctx context.Context, bodies ...string) events.SQSEventResponse {
	t.Helper()
	ev := events.SQSEvent{}
	for i, b := range bodies {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: fmt.Sprintf("m%d", i), Body: b,
			Attributes: map[string]string{"SentTimestamp": fmt.Sprint(time.Now().Add(-time.Second).UnixMilli())}})
	}
	raw, _ := json.Marshal(ev)
	out, err := f.h.Handle(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	return out.(events.SQSEventResponse)
}

func (f *fixture) node(t *testing.T) *corev1.Node {
	t.Helper()
	n, err := f.cs.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) events(t *testing.T, reason string) int {
	t.Helper()
	list, err := f.cs.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range list.Items {
		if e.Reason == reason {
			n++
		}
	}
	return n
}

func failures(r events.SQSEventResponse) []string {
	var out []string
	for _, f := range r.BatchItemFailures {
		out = append(out, f.ItemIdentifier)
	}
	return out
}

func spot(id, instance string) string {
	return fmt.Sprintf(`{"version":"0","id":%q,"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2026-11-22T00:00:00Z","detail":{"instance-id":%q,"instance-action":"terminate"}}`, id, instance)
}

func stateChange(instance, state string) string {
	return fmt.Sprintf(`{"version":"0","id":"sc","detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":%q,"state":%q}}`, instance, state)
}

func rebalance(instance string) string {
	return fmt.Sprintf(`{"version":"0","id":"rb","detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","detail":{"instance-id":%q}}`, instance)
}

func TestActionFor(t *testing.T) {
	cases := []struct {
		m         Message
		rebalance string
		want      Action
	}{
		{Message{Kind: SpotInterruption}, RebalanceIgnore, ActionDrain},
		{Message{Kind: ScheduledChange}, RebalanceIgnore, ActionDrain},
		{Message{Kind: StateChange, State: "stopping"}, RebalanceIgnore, ActionDrain},
		{Message{Kind: StateChange, State: "shutting-down"}, RebalanceIgnore, ActionDrain},
		{Message{Kind: StateChange, State: "stopped"}, RebalanceIgnore, ActionCleanup},
		{Message{Kind: StateChange, State: "terminated"}, RebalanceIgnore, ActionCleanup},
		{Message{Kind: StateChange, State: "running"}, RebalanceIgnore, ActionNone},
		{Message{Kind: RebalanceRecommended}, RebalanceIgnore, ActionNone},
		{Message{Kind: RebalanceRecommended}, RebalanceReplace, ActionReplace},
		{Message{Kind: Unknown}, RebalanceReplace, ActionNone},
	}
	for _, tc := range cases {
		if got := ActionFor(tc.m, tc.rebalance); got != tc.want {
			t.Errorf("%+v under %s: %s, want %s", tc.m, tc.rebalance, got, tc.want)
		}
	}
}

func TestNewRejectsUnknownRebalancePolicy(t *testing.T) {
	f := newFixture(t, "")
	d := f.h.C.d
	d.Settings.Rebalance = "sometimes"
	if _, err := New(d); err == nil || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("err %v", err)
	}
}

// An AWS Health scheduled change about a Dedicated Host names no instance:
// legitimate, acknowledged, nothing touched; never a batch item failure
// (which would park it in the DLQ and page).
func TestScheduledChangeOfNoInstanceIsANoOp(t *testing.T) {
	f := newFixture(t, "")
	body, err := os.ReadFile(filepath.Join("..", "..", "events", "health-scheduled-change-dedicated-host.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp := f.handle(t, string(body))
	if got := failures(resp); len(got) != 0 {
		t.Fatalf("failures %v: a Dedicated Host's scheduled change would go to the DLQ", got)
	}
	if f.passes != 0 || len(f.term.steps) != 0 || f.st.writes != 0 || len(f.cloud.terminated) != 0 {
		t.Fatalf("something was touched: passes=%d steps=%v writes=%d", f.passes, f.term.steps, f.st.writes)
	}
	if !strings.Contains(f.logs.String(), "needs no action") {
		t.Errorf("not logged as a no-op:\n%s", f.logs)
	}
}

func TestMalformedUnknownAndUnowned(t *testing.T) {
	f := newFixture(t, "")
	resp := f.handle(t,
		`not json`,
		`{"version":"0","id":"x","detail-type":"EC2 AMI State Change","source":"aws.ec2","detail":{}}`,
		spot("u", "i-0000000000000dead"),
		`{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-1"}}`,
	)
	if got := failures(resp); len(got) != 2 || got[0] != "m0" || got[1] != "m3" {
		t.Fatalf("failures %v, want [m0 m3]", got)
	}
	for _, id := range []string{"m0", "m3"} {
		if !strings.Contains(f.logs.String(), `"message-id":"`+id+`"`) {
			t.Errorf("no log line names %s:\n%s", id, f.logs)
		}
	}
	if f.passes != 0 || len(f.term.steps) != 0 || len(f.ice.keys) != 0 || f.st.writes != 0 || len(f.cloud.terminated) != 0 {
		t.Fatalf("something was touched: passes=%d steps=%v ice=%v writes=%d", f.passes, f.term.steps, f.ice.keys, f.st.writes)
	}
	for _, want := range []string{`"message_type":"malformed"`, `"message_type":"no_op"`, `"message_type":"spot_interrupted"`, metrics.InterruptionMessageLatency} {
		if !strings.Contains(f.metrics.String(), want) {
			t.Errorf("metrics lack %s:\n%s", want, f.metrics)
		}
	}
}

func TestSpotDuplicatesOneDrain(t *testing.T) {
	f := newFixture(t, "")
	body := spot("e1", instanceID)
	if got := failures(f.handle(t, body, body, body)); len(got) != 0 {
		t.Fatalf("failures %v", got)
	}
	if f.passes != 1 {
		t.Errorf("%d provisioning passes for one batch, want 1", f.passes)
	}
	if len(f.term.steps) != 1 {
		t.Errorf("%d termination steps, want 1", len(f.term.steps))
	}
	want := nwaws.OfferingKey{InstanceType: "m5.large", Zone: "us-west-2a", CapacityType: "spot"}
	if len(f.ice.keys) == 0 || f.ice.keys[0] != want {
		t.Errorf("ICE %v, want %v", f.ice.keys, want)
	}
	cl, _ := f.st.GetNodeClaim(context.Background(), claimName)
	if !cl.Deleting() || cl.DeletionReason() != apis.DeletionReasonInterrupted {
		t.Fatalf("claim not marked: %+v", cl.ObjectMeta)
	}
	mark := *cl.DeletionTimestamp
	n := f.node(t)
	if !n.Spec.Unschedulable || !termination.HasDisruptedTaint(n) {
		t.Errorf("node not cordoned and tainted: %+v", n.Spec)
	}
	if len(f.requeued) != 1 || f.requeued[0].Kind != queue.KindLifecycle || f.requeued[0].Subject != claimName {
		t.Errorf("requeued %+v", f.requeued)
	}
	if got := f.events(t, ReasonSpotInterrupted); got != 1 {
		t.Errorf("%d SpotInterrupted events", got)
	}

	// Delivered again later: nothing new is started.
	if got := failures(f.handle(t, body)); len(got) != 0 {
		t.Fatalf("failures %v", got)
	}
	cl, _ = f.st.GetNodeClaim(context.Background(), claimName)
	if !cl.DeletionTimestamp.Equal(&mark) {
		t.Errorf("mark moved")
	}
	if len(f.term.steps) != 1 || len(f.requeued) != 1 {
		t.Errorf("redelivery started a second drain: steps %v requeued %d", f.term.steps, len(f.requeued))
	}
}

// TestIndexLagFallsBackToTheInstanceTags: a spot warning for an instance
// whose claim the by-instance index does not show yet is still handled when
// the instance carries this stack's tags and names the claim; an instance of
// another stack (or one naming a claim that moved on to another instance)
// stays untouched.
func TestIndexLagFallsBackToTheInstanceTags(t *testing.T) {
	f := newFixture(t, "")
	f.st.indexLag = true
	f.ec2.byID[instanceID] = nwaws.Instance{ID: instanceID, NodeClaim: claimName, State: "running"}
	f.ec2.owned[instanceID] = true
	if got := failures(f.handle(t, spot("e1", instanceID))); len(got) != 0 {
		t.Fatalf("failures %v", got)
	}
	cl, _ := f.st.GetNodeClaim(context.Background(), claimName)
	if !cl.Deleting() || len(f.term.steps) != 1 || f.passes != 1 {
		t.Fatalf("warning not handled through the instance's tags: deleting %v, steps %v, passes %d", cl.Deleting(), f.term.steps, f.passes)
	}

	for name, set := range map[string]func(f *fixture){
		"another stack's instance": func(f *fixture) { f.ec2.owned[instanceID] = false },
		"claim on another instance": func(f *fixture) {
			f.ec2.byID[instanceID] = nwaws.Instance{ID: instanceID, NodeClaim: claimName, State: "running"}
			f.ec2.byID["i-0fedcba987654321"] = nwaws.Instance{ID: "i-0fedcba987654321", NodeClaim: claimName, State: "running"}
			f.ec2.owned["i-0fedcba987654321"] = true
		},
		"unknown to EC2": func(f *fixture) { delete(f.ec2.byID, instanceID) },
	} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t, "")
			f.st.indexLag = true
			f.ec2.byID[instanceID] = nwaws.Instance{ID: instanceID, NodeClaim: claimName, State: "running"}
			f.ec2.owned[instanceID] = true
			set(f)
			id := instanceID
			if name == "claim on another instance" {
				id = "i-0fedcba987654321"
			}
			if got := failures(f.handle(t, spot("e1", id))); len(got) != 0 {
				t.Fatalf("failures %v", got)
			}
			cl, _ := f.st.GetNodeClaim(context.Background(), claimName)
			if cl.Deleting() || len(f.term.steps) != 0 || f.passes != 0 || f.st.writes != 0 {
				t.Fatalf("touched: deleting %v, steps %v, passes %d, writes %d", cl.Deleting(), f.term.steps, f.passes, f.st.writes)
			}
		})
	}
}

func TestRebalance(t *testing.T) {
	f := newFixture(t, RebalanceIgnore)
	if got := failures(f.handle(t, rebalance(instanceID))); len(got) != 0 {
		t.Fatal(got)
	}
	cl, _ := f.st.GetNodeClaim(context.Background(), claimName)
	if f.passes != 0 || len(f.term.steps) != 0 || cl.Deleting() || cl.IsTrue(apis.ConditionDisrupting) || f.node(t).Spec.Unschedulable {
		t.Fatalf("ignore acted: passes=%d steps=%v", f.passes, f.term.steps)
	}
	if f.events(t, ReasonRebalance) != 1 {
		t.Errorf("no rebalance event")
	}

	// replace, but the replacement cannot be provisioned: no drain, the
	// node takes pods again, the message is retried.
	f = newFixture(t, RebalanceReplace)
	f.passFn = func(int) (provisioning.Result, error) { return provisioning.Result{}, errors.New("ec2 down") }
	if got := failures(f.handle(t, rebalance(instanceID))); len(got) != 1 {
		t.Fatalf("failures %v", got)
	}
	cl, _ = f.st.GetNodeClaim(context.Background(), claimName)
	if cl.Deleting() || cl.IsTrue(apis.ConditionDisrupting) || len(f.term.steps) != 0 {
		t.Fatalf("drained without a replacement: deleting=%v disrupting=%v steps=%v", cl.Deleting(), cl.IsTrue(apis.ConditionDisrupting), f.term.steps)
	}

	// replace with a replacement: Disrupting during the pass, then the
	// mark and the drain.
	f = newFixture(t, RebalanceReplace)
	f.passFn = func(int) (provisioning.Result, error) {
		cl, _ := f.st.GetNodeClaim(context.Background(), claimName)
		if !cl.IsTrue(apis.ConditionDisrupting) || cl.Deleting() {
			t.Errorf("during the pass: disrupting=%v deleting=%v", cl.IsTrue(apis.ConditionDisrupting), cl.Deleting())
		}
		return provisioning.Result{Launched: []string{"r"}}, nil
	}
	if got := failures(f.handle(t, rebalance(instanceID))); len(got) != 0 {
		t.Fatal(got)
	}
	cl, _ = f.st.GetNodeClaim(context.Background(), claimName)
	if !cl.Deleting() || len(f.term.steps) != 1 {
		t.Fatalf("replace did not drain after the replacement: deleting=%v steps=%v", cl.Deleting(), f.term.steps)
	}
	if len(f.ice.keys) != 0 {
		t.Errorf("rebalance marked ICE: %v", f.ice.keys)
	}
}

func TestGoneInstanceCleanedUp(t *testing.T) {
	f := newFixture(t, "")
	if got := failures(f.handle(t, stateChange(instanceID, "terminated"))); len(got) != 0 {
		t.Fatal(got)
	}
	if f.passes != 1 {
		t.Errorf("no replacement pass")
	}
	if len(f.term.steps) != 0 {
		t.Errorf("gone instance drained: %v", f.term.steps)
	}
	if len(f.cloud.terminated) != 1 || f.cloud.terminated[0] != instanceID {
		t.Errorf("terminated %v", f.cloud.terminated)
	}
	if _, err := f.st.GetNodeClaim(context.Background(), claimName); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("claim kept: %v", err)
	}
	if _, err := f.cs.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{}); err == nil {
		t.Errorf("node kept")
	}
	// The echo of that (and any later state change) touches nothing.
	if got := failures(f.handle(t, stateChange(instanceID, "terminated"))); len(got) != 0 || f.passes != 1 {
		t.Fatalf("echo: failures %v passes %d", got, f.passes)
	}
}

func TestOwnTerminationEchoIgnored(t *testing.T) {
	f := newFixture(t, "")
	_, _ = f.st.MutateNodeClaim(context.Background(), claimName, func(c *apis.NodeClaim) error {
		c.MarkForDeletion(apis.DeletionReasonEmpty, "empty", metav1.Now())
		c.SetCondition(termination.ConditionInstanceTerminating, metav1.ConditionTrue, "InstanceTerminating", "", metav1.Now())
		return nil
	})
	if got := failures(f.handle(t, stateChange(instanceID, "shutting-down"))); len(got) != 0 {
		t.Fatal(got)
	}
	if f.passes != 0 || len(f.term.steps) != 0 {
		t.Fatalf("acted on its own termination: passes %d steps %v", f.passes, f.term.steps)
	}
	cl, _ := f.st.GetNodeClaim(context.Background(), claimName)
	if cl.DeletionReason() != apis.DeletionReasonEmpty {
		t.Errorf("reason changed to %s", cl.DeletionReason())
	}
}

// Routine transitions of every instance in the account cost no lookup.
func TestRoutineStateChangesNotLookedUp(t *testing.T) {
	f := newFixture(t, "")
	if got := failures(f.handle(t, stateChange(instanceID, "pending"), stateChange(instanceID, "running"))); len(got) != 0 {
		t.Fatal(got)
	}
	if f.st.lookups != 0 || f.passes != 0 {
		t.Fatalf("lookups %d passes %d", f.st.lookups, f.passes)
	}
}

func TestHandleRejectsOtherEvents(t *testing.T) {
	f := newFixture(t, "")
	_, err := f.h.Handle(context.Background(), json.RawMessage(`{"version":"0","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`))
	if !errors.Is(err, ErrNotSQS) {
		t.Fatalf("err %v", err)
	}
}
