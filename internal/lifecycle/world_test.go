package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/nodewright/nodewright/internal/apis"
	nwaws "github.com/nodewright/nodewright/internal/aws"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/lifecycle"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/queue"
	"github.com/nodewright/nodewright/internal/store"
	"github.com/nodewright/nodewright/internal/termination"
)

// launchClaim creates a claim the way the provisioner does and launches
// it; the name gets the env's unique suffix.
func (e *env) launchClaim(name string) *apis.NodeClaim {
	e.t.Helper()
	name = fmt.Sprintf("%s-%d", name, e.id)
	np := e.cfg.NodePool("default")
	tmpl := np.Spec.Template
	cl := &apis.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(e.clock.Now()), Labels: map[string]string{
			apis.NodePoolLabelKey: np.Name, apis.NodeClassLabelKey: "default", "team": "payments",
		}},
		Spec: apis.NodeClaimSpec{
			Requirements: []apis.NodeSelectorRequirementWithMinValues{
				{Key: corev1.LabelInstanceTypeStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large"}},
				{Key: apis.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{"on-demand"}},
			},
			Taints: tmpl.Spec.Taints, StartupTaints: tmpl.Spec.StartupTaints, NodeClassRef: tmpl.Spec.NodeClassRef,
			ExpireAfter: tmpl.Spec.ExpireAfter, TerminationGracePeriod: tmpl.Spec.TerminationGracePeriod,
		},
	}
	if err := e.st.CreateNodeClaim(e.ctx, cl); err != nil {
		e.t.Fatalf("create claim: %v", err)
	}
	it, ok := e.cat.Get("m5.large")
	if !ok {
		e.t.Fatal("m5.large not in the catalog")
	}
	inst, err := e.p.Launch(e.ctx, nwaws.LaunchRequest{NodeClaim: cl, NodeClass: e.cfg.NodeClass("default"), InstanceTypes: []*catalog.InstanceType{it}})
	if err != nil {
		e.t.Fatalf("launch: %v", err)
	}
	e.t.Cleanup(func() { _ = e.p.Terminate(context.Background(), inst.ID) })
	e.awaitVisible(inst.ID)
	out, err := e.st.MutateNodeClaim(e.ctx, name, func(c *apis.NodeClaim) error {
		inst.Record(c, metav1.NewTime(e.clock.Now()))
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// awaitVisible waits until DescribeInstances shows a launched instance
// (simulator rule launch-consistency). The tests move the controller's
// clock past GCGrace and the launch timeouts at once; in a real run that
// much time passes and EC2 shows the instance long before.
func (e *env) awaitVisible(id string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := e.p.GetInstance(e.ctx, id)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("launched instance %s never visible: %v", id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reconcileUntil reconciles a claim until cond holds.
func (e *env) reconcileUntil(c *lifecycle.Controller, name, what string, cond func(lifecycle.Outcome, *apis.NodeClaim) bool) *apis.NodeClaim {
	e.t.Helper()
	var last lifecycle.Outcome
	var lastErr error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		last, lastErr = c.Reconcile(e.ctx, name)
		cl, err := e.st.GetNodeClaim(e.ctx, name)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			e.t.Fatal(err)
		}
		if lastErr == nil && cond(last, cl) {
			return cl
		}
		time.Sleep(100 * time.Millisecond)
	}
	e.t.Fatalf("nodeclaim %s never %s (last outcome %+v, error %v)", name, what, last, lastErr)
	return nil
}

// initialized drives a launched claim through registration (removing the
// startup taint as a node agent would) to initialization.
func (e *env) initialized(c *lifecycle.Controller, name string) (*apis.NodeClaim, *corev1.Node) {
	e.t.Helper()
	cl := e.reconcileUntil(c, name, "registered", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl != nil && cl.IsTrue(apis.ConditionRegistered)
	})
	if _, err := e.kc.RemoveTaints(e.ctx, cl.Status.NodeName, "example.com/agent", ""); err != nil {
		e.t.Fatal(err)
	}
	cl = e.reconcileUntil(c, name, "initialized", func(_ lifecycle.Outcome, cl *apis.NodeClaim) bool {
		return cl != nil && cl.IsTrue(apis.ConditionInitialized)
	})
	n, err := e.cs.CoreV1().Nodes().Get(e.ctx, cl.Status.NodeName, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return cl, n
}

func (e *env) runningPod(name, node string, mutate func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	grace := int64(0)
	no := false
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			NodeName: node, TerminationGracePeriodSeconds: &grace, AutomountServiceAccountToken: &no,
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	p, err := e.cs.CoreV1().Pods(e.ns).Create(e.ctx, p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err = e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	if err != nil {
		e.t.Fatalf("pod %s not Running: %v", name, err)
	}
	return p
}

// pump consumes the work queue into the handler (as Lambda's SQS event
// source does) until done reports true.
func (e *env) pump(h *lifecycle.Handler, what string, done func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			e.t.Fatalf("work queue never got %s", what)
		}
		e.pumpOnce(h)
	}
}

// pumpOnce receives one batch (waiting up to a second) and hands it to the
// handler; it reports how many messages it handled.
func (e *env) pumpOnce(h *lifecycle.Handler) int {
	e.t.Helper()
	out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.work, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return 0
	}
	ev := events.SQSEvent{}
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, Body: *m.Body, ReceiptHandle: *m.ReceiptHandle})
	}
	raw, _ := json.Marshal(ev)
	res, err := h.Handle(e.ctx, raw)
	if err != nil {
		e.t.Fatalf("handler: %v", err)
	}
	failed := map[string]bool{}
	for _, f := range res.(events.SQSEventResponse).BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range out.Messages {
		if failed[*m.MessageId] {
			e.t.Errorf("work item %s failed: %s", *m.MessageId, *m.Body)
			continue
		}
		if _, err := e.sqs.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.work, ReceiptHandle: m.ReceiptHandle}); err != nil {
			e.t.Fatal(err)
		}
	}
	return len(out.Messages)
}

// tick delivers an EventBridge schedule event to the handler.
func (e *env) tick(h *lifecycle.Handler) lifecycle.PassResult {
	e.t.Helper()
	res, err := h.Handle(e.ctx, json.RawMessage(`{"version":"0","id":"1","detail-type":"Scheduled Event","source":"aws.events","detail":{}}`))
	if err != nil {
		e.t.Fatalf("scheduled pass: %v", err)
	}
	return res.(lifecycle.PassResult)
}

func (e *env) send(claim string) {
	e.t.Helper()
	if err := queue.New(e.sqs, e.work).Send(e.ctx, queue.Message{Kind: queue.KindLifecycle, Subject: claim, Reason: "test"}, 0); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) mark(name, reason string) {
	e.t.Helper()
	if _, newly, err := termination.Mark(e.ctx, e.st, name, reason, "test", e.clock.Now()); err != nil || !newly {
		e.t.Fatalf("mark %s: newly=%v %v", name, newly, err)
	}
	// A second decision keeps the first mark.
	if cl, newly, err := termination.Mark(e.ctx, e.st, name, apis.DeletionReasonEmpty, "again", e.clock.Now().Add(time.Hour)); err != nil || newly || cl.DeletionReason() != reason {
		e.t.Fatalf("second mark of %s: newly=%v reason=%q %v", name, newly, cl.DeletionReason(), err)
	}
}

func (e *env) gone(name string) bool {
	_, err := e.st.GetNodeClaim(e.ctx, name)
	return errors.Is(err, store.ErrNotFound)
}

func (e *env) terminateCalls(id string) int {
	n := 0
	for _, c := range e.cloud.AWS.Calls("ec2", "TerminateInstances") {
		for k, v := range c.Params {
			if strings.HasPrefix(k, "InstanceId.") && v == id && c.ErrorCode == "" {
				n++
			}
		}
	}
	return n
}

func (e *env) nodeExists(name string) bool {
	_, err := e.cs.CoreV1().Nodes().Get(e.ctx, name, metav1.GetOptions{})
	return err == nil
}

func (e *env) instanceState(id string) string {
	inst, _, ok := e.cloud.AWS.EC2().Instance(id)
	if !ok || inst.State == nil {
		return "unknown"
	}
	return string(inst.State.Name)
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}

// guard creates a PodDisruptionBudget keeping minAvailable of the pods
// labelled app=app (minAvailable of them running) and waits until the
// disruption controller has seen it allow no disruption.
func (e *env) guard(t *testing.T, app string, minAvailable int32) {
	t.Helper()
	cloudtest.PDB{Name: app, MinAvailable: &minAvailable}.Create(e.ctx, t, e.cs, e.ns)
	waitPDB(t, e, app, minAvailable, 0)
}

func waitPDB(t *testing.T, e *env, name string, expected, allowed int32) {
	t.Helper()
	var p *policyv1.PodDisruptionBudget
	err := wait.PollUntilContextTimeout(e.ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = e.cs.PolicyV1().PodDisruptionBudgets(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return p.Status.ObservedGeneration == p.Generation && p.Status.ExpectedPods == expected && p.Status.DisruptionsAllowed == allowed, nil
	})
	if err != nil {
		t.Fatalf("PDB %s never reached disruptionsAllowed=%d: %v (status %+v)", name, allowed, err, p.Status)
	}
}

func hasEvent(e *env, node, reason string) bool {
	evs, err := e.cs.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node})
	if err != nil {
		return false
	}
	for _, ev := range evs.Items {
		if ev.Reason == reason {
			return true
		}
	}
	return false
}

func waitState(t *testing.T, e *env, id, state string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return e.instanceState(id) == state, nil
	})
	if err != nil {
		t.Fatalf("instance %s never %s (is %s)", id, state, e.instanceState(id))
	}
}

func waitPodGone(t *testing.T, e *env, name string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := e.cs.CoreV1().Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
		return err != nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s never went away", name)
	}
}
