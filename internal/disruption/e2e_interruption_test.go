package disruption_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/app"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/interruption"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// zeroBudget is scenario 5's NodePool: everything may be disrupted, except
// that a budget of 0 nodes is active all the time (a schedule every minute
// lasting an hour always covers now).
var zeroBudget = scenarioPool([]string{"m5.large", "m5.xlarge", "m5.2xlarge"}, "WhenEmptyOrUnderutilized", "5s",
	budget("100%"), noneEver)

// Scenario 5, second half: budgets only limit voluntary disruption. Under a
// zero budget, a spot interruption of one of the pool's nodes still goes
// the whole way (EventBridge -> SQS -> the interruption function): the node
// is tainted and drained, a replacement is launched and the pods run again,
// while the disruption function, run alongside, decides nothing and says
// why in DisruptionBlocked events.
func TestScenario5ZeroBudgetInterruptionStillActs(t *testing.T) {
	start := time.Now()
	e := newEnv(t, zeroBudget)
	useSpot(e)
	fn := startInterruptionFunction(e)

	e.deployment("web", 8, "1", int32p(1))
	e.launchAll("web")
	e.untilClaimsInitialized("web")
	before := e.claims()
	for _, cl := range before {
		if ct := cl.Labels[apis.CapacityTypeLabelKey]; ct != apis.CapacityTypeSpot {
			t.Fatalf("claim %s is %s; the pool allows spot only", cl.Name, ct)
		}
	}
	var layout []string
	for _, cl := range before {
		layout = append(layout, fmt.Sprintf("%s %s: %d pods", cl.Status.NodeName, cl.Labels[catalog.LabelInstanceType], podsOn(e, "web", cl.Status.NodeName)))
	}
	victim := pickVictim(e, before)
	t.Logf("8 pods on %d spot nodes after %v (%s); interrupting %s (%s)", len(before), time.Since(start).Round(time.Second),
		strings.Join(layout, ", "), victim.Status.NodeName, victim.Status.InstanceID)

	// Only the interrupted claim may ever be deleted, and nothing may be
	// marked Disrupting (the disruption function's own replacements).
	noVoluntary := func() {
		for _, cl := range e.claims() {
			if cl.IsTrue(apis.ConditionDisrupting) {
				t.Fatalf("claim %s is Disrupting under a zero budget", cl.Name)
			}
			if cl.Deleting() && cl.Name != victim.Name {
				t.Fatalf("claim %s is being deleted (%s) under a zero budget; only %s was interrupted", cl.Name, cl.DeletionReason(), victim.Name)
			}
		}
	}

	// First the zero budget is seen holding the pool's nodes.
	e.until("disruption blocked by the budget", time.Minute, true, []string{"web"}, func() bool {
		return len(budgetBlocked(e)) > 0
	}, noVoluntary)
	passesBefore := len(e.results)

	fewest, stopWatch := e.watchRunning("web")
	defer stopWatch()
	tainted := watchDisruptedTaint(e, victim.Status.NodeName)
	reclaimed := time.Now()
	if err := e.cloud.AWS.ReclaimSpot(victim.Status.InstanceID); err != nil {
		t.Fatal(err)
	}
	var rescheduled time.Time
	e.until("interruption handled, pods running elsewhere", 100*time.Second, true, []string{"web"}, func() bool {
		if _, err := e.st.GetNodeClaim(e.ctx, victim.Name); !errors.Is(err, store.ErrNotFound) {
			return false
		}
		if _, err := e.cs.CoreV1().Nodes().Get(e.ctx, victim.Status.NodeName, metav1.GetOptions{}); err == nil {
			return false
		}
		if total, running, _ := e.pods("web"); total != 8 || running != 8 {
			return false
		}
		if rescheduled.IsZero() {
			rescheduled = time.Now()
		}
		return true
	}, noVoluntary)
	took := rescheduled.Sub(reclaimed)

	b, ok := fn.handled("EC2 Spot Instance Interruption Warning")
	if !ok {
		t.Fatal("the spot warning never reached the interruption function")
	}
	if b.err != nil || len(b.resp.BatchItemFailures) != 0 {
		t.Fatalf("interruption function failed the warning: %v %+v", b.err, b.resp)
	}
	taintedAt := tainted()
	if taintedAt.IsZero() {
		t.Fatalf("node %s never carried %s", victim.Status.NodeName, apis.DisruptedTaintKey)
	}
	fleets := fleetCallsSince(e, reclaimed)
	if len(fleets) == 0 {
		t.Fatal("no replacement CreateFleet after the interruption")
	}
	if n := len(e.nodeEvents(interruption.ReasonSpotInterrupted)[victim.Status.NodeName]); n == 0 {
		t.Errorf("no %s event on node %s", interruption.ReasonSpotInterrupted, victim.Status.NodeName)
	}
	if took >= 2*time.Minute {
		t.Errorf("pods running again %v after the warning, past the 2-minute reclaim", took)
	}
	if low := fewest(); low < 7 {
		t.Errorf("only %d of 8 pods Running at one point; the PDB allows 1 unavailable", low)
	}

	// Every other claim survived, and the new ones replace the victim.
	after := map[string]*apis.NodeClaim{}
	for _, cl := range e.claims() {
		after[cl.Name] = cl
	}
	for _, cl := range before {
		if _, ok := after[cl.Name]; !ok && cl.Name != victim.Name {
			t.Errorf("claim %s (%s) disappeared under a zero budget", cl.Name, cl.Status.NodeName)
		}
	}
	var replacements []string
	for name, cl := range after {
		if !slices.ContainsFunc(before, func(b *apis.NodeClaim) bool { return b.Name == name }) {
			replacements = append(replacements, fmt.Sprintf("%s (%s %s)", cl.Status.NodeName, cl.Labels[catalog.LabelInstanceType], cl.Labels[apis.CapacityTypeLabelKey]))
		}
	}
	if len(replacements) == 0 {
		t.Fatal("no replacement claim")
	}
	tombs, err := e.st.ListTombstones(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(tombs) != 1 || tombs[0].Claim.Name != victim.Name || tombs[0].Claim.DeletionReason() != apis.DeletionReasonInterrupted {
		var got []string
		for _, ts := range tombs {
			got = append(got, ts.Claim.Name+":"+ts.Claim.DeletionReason())
		}
		t.Errorf("deleted claims %v, want only %s:%s", got, victim.Name, apis.DeletionReasonInterrupted)
	}

	// The disruption function kept refusing throughout, and keeps refusing
	// on the cluster the interruption left behind (its replacement too).
	isReplacement := func(node string) bool {
		return node != victim.Status.NodeName && !slices.ContainsFunc(before, func(b *apis.NodeClaim) bool { return b.Status.NodeName == node })
	}
	settleFrom := len(e.results)
	deadline := time.Now().Add(15 * time.Second)
	e.until("disruption passes after the interruption, the replacement blocked too", time.Minute, true, []string{"web"}, func() bool {
		if time.Now().Before(deadline) || len(e.results)-settleFrom < 3 {
			return false
		}
		for node := range budgetBlocked(e) {
			if isReplacement(node) {
				return true
			}
		}
		return false
	}, noVoluntary)
	for i, r := range e.results {
		if r.Decided || r.Executed || r.Done {
			t.Errorf("disruption pass %d acted under a zero budget: %+v", i, r)
		}
	}
	blocked := budgetBlocked(e)
	if len(blocked) == 0 {
		t.Error("no DisruptionBlocked event names the zero budget")
	}
	var blockedReplacement []string
	for node := range blocked {
		if isReplacement(node) {
			blockedReplacement = append(blockedReplacement, node)
		}
	}
	t.Logf("scenario 5 (interruption): reclaim -> warning received by the function %v, -> replacement CreateFleet %v (%d calls), -> node tainted %v, -> 8 pods Running again and the node gone %v (deadline 2m); fewest Running pods %d of 8 (PDB maxUnavailable 1); replacements %v",
		b.received.Sub(reclaimed).Round(time.Millisecond), fleets[0].Sub(reclaimed).Round(time.Millisecond), len(fleets),
		taintedAt.Sub(reclaimed).Round(time.Millisecond), took.Round(time.Millisecond), fewest(), replacements)
	t.Logf("disruption: %d passes (%d before the reclaim), none decided; DisruptionBlocked (budget) on %d nodes, %d of them replacements; test took %v",
		len(e.results), passesBefore, len(blocked), len(blockedReplacement), time.Since(start).Round(time.Second))
}

// useSpot switches the environment's NodePool to spot capacity: the
// package's pool is on-demand only, and only spot instances are reclaimed.
// Every controller reads the one *apis.Config at each pass, so replacing its
// contents before the first launch is the same as having loaded it.
func useSpot(e *env) {
	e.t.Helper()
	spot := e.spec
	spot.Requirements = slices.Clone(spot.Requirements)
	if spot.Requirements[0].Key != apis.CapacityTypeLabelKey {
		e.t.Fatalf("the package's pool no longer pins its capacity type first; adapt useSpot")
	}
	spot.Requirements[0] = apistest.In(apis.CapacityTypeLabelKey, "spot")
	cfg := apistest.Load(e.t, spot.YAML()+cloudtest.NodeClassYAML("default", e.cloud.ClusterName))
	*e.cfg = *cfg
}

// untilClaimsInitialized waits for every claim to have its node
// initialized: the pods may run before every claim launched for them has
// registered.
func (e *env) untilClaimsInitialized(apps ...string) {
	e.t.Helper()
	e.until("claims initialized", time.Minute, false, apps, func() bool {
		for _, cl := range e.claims() {
			if cl.Status.NodeName == "" || !cl.IsTrue(apis.ConditionInitialized) {
				return false
			}
		}
		return true
	}, nil)
}

// pickVictim returns the claim whose node runs the most of the deployment's
// pods, after checking that they cannot all move to the other nodes (so
// the interruption needs a replacement, which the test asserts).
func pickVictim(e *env, claims []*apis.NodeClaim) *apis.NodeClaim {
	e.t.Helper()
	var victim *apis.NodeClaim
	most := -1
	for _, cl := range claims {
		if n := podsOn(e, "web", cl.Status.NodeName); n > most {
			victim, most = cl, n
		}
	}
	free := 0 // 1-CPU slots left on the other nodes
	for _, cl := range claims {
		if cl.Name == victim.Name {
			continue
		}
		node, err := e.cs.CoreV1().Nodes().Get(e.ctx, cl.Status.NodeName, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		used := int64(0)
		pods, err := e.cs.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
		if err != nil {
			e.t.Fatal(err)
		}
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
				continue
			}
			for _, c := range p.Spec.Containers {
				used += c.Resources.Requests.Cpu().MilliValue()
			}
		}
		free += int((node.Status.Allocatable.Cpu().MilliValue() - used) / 1000)
	}
	if free >= most {
		e.t.Fatalf("setup: the %d pods of %s fit in the %d free CPUs of the other %d nodes; no replacement would be needed", most, victim.Status.NodeName, free, len(claims)-1)
	}
	return victim
}

func podsOn(e *env, app, node string) int {
	e.t.Helper()
	list, err := e.cs.CoreV1().Pods(e.ns).List(e.ctx, metav1.ListOptions{LabelSelector: "app=" + app, FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(list.Items)
}

// budgetBlocked returns the nodes with a DisruptionBlocked event that names
// this test's pool and its exhausted budget.
func budgetBlocked(e *env) map[string]bool {
	out := map[string]bool{}
	for node, msgs := range e.nodeEvents(disruption.ReasonBlocked) {
		for _, m := range msgs {
			if strings.Contains(m, "no disruption budget") && strings.Contains(m, e.pool) {
				out[node] = true
			}
		}
	}
	return out
}

// watchDisruptedTaint reports when the node first carries the disrupted
// taint as the API server sees it (a watch started now); zero if never
// within 90 s.
func watchDisruptedTaint(e *env, node string) (wait func() time.Time) {
	e.t.Helper()
	return cloudtest.WatchTaint(e.ctx, e.t, e.cs, node, apis.DisruptedTaintKey, 90*time.Second)
}

func fleetCallsSince(e *env, since time.Time) []time.Time {
	var out []time.Time
	for _, c := range e.cloud.AWS.Calls("ec2", "CreateFleet") {
		if c.ErrorCode != "" || c.Time.Before(since) {
			continue
		}
		for k, v := range c.Params {
			if strings.HasPrefix(k, "TagSpecification.") && v == e.pool {
				out = append(out, c.Time)
				break
			}
		}
	}
	return out
}

// queueFunction is a function as deployed behind an SQS queue: an event
// source mapping polls the queue as the stack's controller role and hands
// each batch to the real handler, built by the composition root over the
// environment's table, configuration and work queue (so the lifecycle the
// environment steps carries drains on). What the handler did not report
// failed is deleted (nothing when the invocation failed).
type queueFunction struct {
	logs cloudtest.SyncBuffer

	mu      sync.Mutex
	batches []queueBatch
}

type queueBatch struct {
	received time.Time
	bodies   []string
	resp     events.SQSEventResponse
	err      error
}

// functionApp builds function fn's App as the stack's controller role,
// over the environment's settings adjusted by edit.
func functionApp(e *env, fn string, stack *localcloud.Stack, logs io.Writer, edit func(*settings.Settings)) *app.App {
	e.t.Helper()
	s := settings.Settings{ClusterName: e.cloud.ClusterName, TableName: e.st.Table(), Owner: cloudtest.Owner(e.cloud, e.st.Table()), WorkQueueURL: e.work,
		BatchIdle: 100 * time.Millisecond, BatchMax: 2 * time.Second, LogLevel: slog.LevelInfo}
	edit(&s)
	a, err := app.New(e.ctx, s, app.Options{Function: fn, Out: logs, KubeREST: e.cloud.ControllerREST, Config: e.cfg, AWSCredentials: stack.Controller})
	if err != nil {
		e.t.Fatalf("%s app: %v", fn, err)
	}
	return a
}

// serve is the event source mapping of queue name (URL url) for handle,
// until the test ends.
func (f *queueFunction) serve(e *env, stack *localcloud.Stack, name, url string, handle func(context.Context, json.RawMessage) (any, error)) {
	t := e.t
	poller := sqs.NewFromConfig(cloudtest.RoleConfig(e.ctx, t, stack.Controller))
	ctx, cancel := context.WithCancel(e.ctx)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() {
		for ctx.Err() == nil {
			out, err := poller.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: &url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
			if err != nil || len(out.Messages) == 0 {
				continue
			}
			b := queueBatch{received: time.Now()}
			ev := events.SQSEvent{}
			for _, m := range out.Messages {
				ev.Records = append(ev.Records, events.SQSMessage{MessageId: sdkaws.ToString(m.MessageId), ReceiptHandle: sdkaws.ToString(m.ReceiptHandle),
					Body: sdkaws.ToString(m.Body), EventSource: "aws:sqs", EventSourceARN: e.cloud.AWS.SQS().QueueARN(name)})
				b.bodies = append(b.bodies, sdkaws.ToString(m.Body))
			}
			raw, _ := json.Marshal(ev)
			// e.ctx, not ctx: stopping the loop must not abort a batch midway
			// (dynalite does not survive aborted requests well).
			res, err := handle(e.ctx, raw)
			b.err = err
			if err == nil {
				b.resp = res.(events.SQSEventResponse)
			}
			failed := map[string]bool{}
			for _, f := range b.resp.BatchItemFailures {
				failed[f.ItemIdentifier] = true
			}
			for _, r := range ev.Records {
				if err == nil && !failed[r.MessageId] {
					_, _ = poller.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &url, ReceiptHandle: sdkaws.String(r.ReceiptHandle)})
				}
			}
			f.mu.Lock()
			f.batches = append(f.batches, b)
			f.mu.Unlock()
		}
	})
}

// handled returns the first batch that carried a message containing s.
func (f *queueFunction) handled(s string) (queueBatch, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, b := range f.batches {
		for _, body := range b.bodies {
			if strings.Contains(body, s) {
				return b, true
			}
		}
	}
	return queueBatch{}, false
}

// received returns the batches handled so far.
func (f *queueFunction) received() []queueBatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]queueBatch(nil), f.batches...)
}

// startInterruptionFunction deploys the interruption function: the
// stack's EventBridge rules feed its queue, which an event source mapping
// hands to the real handler.
func startInterruptionFunction(e *env) *queueFunction {
	e.t.Helper()
	t := e.t
	fn := &queueFunction{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("interruption function logs:\n%s", fn.logs.String())
		}
	})
	name := fmt.Sprintf("dintr-%s-%d", e.pool, time.Now().UnixNano()%1e6)
	url := cloudtest.CreateQueue(e.ctx, t, e.admin, name, map[string]string{"VisibilityTimeout": "30"})
	stack := cloudtest.Deploy(t, e.cloud, localcloud.StackResources{Table: e.st.Table(), WorkQueue: e.work, InterruptionQueue: name})
	cloudtest.RouteInterruptionEvents(t, e.cloud.AWS, name, name)
	a := functionApp(e, "interruption", stack, &fn.logs, func(s *settings.Settings) { s.Rebalance = interruption.RebalanceIgnore })
	h, err := a.InterruptionHandler()
	if err != nil {
		t.Fatalf("interruption handler: %v", err)
	}
	fn.serve(e, stack, name, url, h.Handle)
	return fn
}
