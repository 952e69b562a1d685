package disruption_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/catalog"
	"github.com/nodewright/nodewright/internal/disruption"
	"github.com/nodewright/nodewright/internal/localcloud/cloudtest"
	"github.com/nodewright/nodewright/internal/provisioning"
	"github.com/nodewright/nodewright/internal/store"
)

// step advances the world once, as AWS would: the lifecycle consumes its
// work queue and ticks every 5 s, the provisioner runs when pods are
// unschedulable, and (when disrupt) the disruption function runs every 2 s.
func (e *env) step(disrupt bool, apps ...string) {
	e.t.Helper()
	e.pumpOnce()
	if time.Since(e.lastTick) > 5*time.Second {
		if _, err := e.life.Handle(e.ctx, json.RawMessage(`{"detail-type":"Scheduled Event","source":"aws.events","detail":{}}`)); err != nil {
			e.t.Logf("lifecycle pass: %v", err)
		}
		e.lastTick = time.Now()
	}
	for _, a := range apps {
		if _, _, pending := e.pods(a); pending > 0 {
			if _, err := e.prov.Run(e.ctx, provisioning.Trigger{Source: provisioning.TriggerManual}); err != nil {
				e.t.Logf("provisioner run: %v", err)
			}
			break
		}
	}
	if disrupt && time.Since(e.lastDis) > 2*time.Second {
		res, err := e.dis.Run(e.ctx)
		if err != nil {
			e.t.Fatalf("disruption pass: %v", err)
		}
		e.lastDis = time.Now()
		e.results = append(e.results, res)
		if res.Decided || res.Executed || res.Done || res.Dropped != "" {
			e.t.Logf("disruption: phase=%s decided=%v executed=%v done=%v dropped=%q waiting=%q: %s", res.Phase, res.Decided, res.Executed, res.Done, res.Dropped, res.Waiting, res.Message)
		}
	}
}

func (e *env) pumpOnce() {
	e.t.Helper()
	out, err := e.sqs.ReceiveMessage(e.ctx, &sqs.ReceiveMessageInput{QueueUrl: &e.work, MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out.Messages) == 0 {
		return
	}
	ev := events.SQSEvent{}
	for _, m := range out.Messages {
		ev.Records = append(ev.Records, events.SQSMessage{MessageId: *m.MessageId, Body: *m.Body, ReceiptHandle: *m.ReceiptHandle})
	}
	raw, _ := json.Marshal(ev)
	res, err := e.life.Handle(e.ctx, raw)
	if err != nil {
		e.t.Logf("lifecycle batch: %v", err)
		return
	}
	failed := map[string]bool{}
	for _, f := range res.(events.SQSEventResponse).BatchItemFailures {
		failed[f.ItemIdentifier] = true
	}
	for _, m := range out.Messages {
		if failed[*m.MessageId] {
			continue
		}
		if _, err := e.sqs.DeleteMessage(e.ctx, &sqs.DeleteMessageInput{QueueUrl: &e.work, ReceiptHandle: m.ReceiptHandle}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// until steps the world until done holds (checking inv after every step).
func (e *env) until(what string, timeout time.Duration, disrupt bool, apps []string, done func() bool, inv func()) {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for !done() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not reached within %v", what, timeout)
		}
		e.step(disrupt, apps...)
		if inv != nil {
			inv()
		}
	}
}

func (e *env) claims() []*apis.NodeClaim {
	e.t.Helper()
	return cloudtest.Claims(e.ctx, e.t, e.st)
}

// cost is what the live claims cost per hour.
func (e *env) cost() (float64, int) {
	sum := 0.0
	cls := e.claims()
	for _, cl := range cls {
		it, ok := e.cat.Get(cl.Labels[catalog.LabelInstanceType])
		if !ok {
			continue
		}
		if o, ok := it.Offering(cl.Labels[catalog.LabelTopologyZone], cl.Labels[apis.CapacityTypeLabelKey]); ok {
			sum += o.Price
		}
	}
	return sum, len(cls)
}

func (e *env) busy() (deleting, disrupting int) {
	for _, cl := range e.claims() {
		switch {
		case cl.Deleting():
			deleting++
		case cl.IsTrue(apis.ConditionDisrupting):
			disrupting++
		}
	}
	return
}

func (e *env) settled() bool {
	del, dis := e.busy()
	if del+dis > 0 {
		return false
	}
	if _, err := e.st.GetKV(e.ctx, disruption.CommandKey); !errors.Is(err, store.ErrNotFound) {
		return false
	}
	return true
}

// nodeEvents returns the messages of events with reason on nodes.
func (e *env) nodeEvents(reason string) map[string][]string {
	e.t.Helper()
	list, err := e.cs.CoreV1().Events("").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Node,reason=" + reason})
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ev := range list.Items {
		out[ev.InvolvedObject.Name] = append(out[ev.InvolvedObject.Name], ev.Message)
	}
	return out
}

func (e *env) launchAll(apps ...string) {
	e.t.Helper()
	e.until("pods running", 3*time.Minute, false, apps, func() bool {
		for _, a := range apps {
			list, err := e.cs.AppsV1().Deployments(e.ns).Get(e.ctx, a, metav1.GetOptions{})
			if err != nil {
				e.t.Fatal(err)
			}
			if _, running, _ := e.pods(a); int32(running) != *list.Spec.Replicas {
				return false
			}
		}
		return true
	}, nil)
}

// scaleDown scales a deployment down to replicas and waits until only that
// many pods are left, all Running.
func (e *env) scaleDown(app string, replicas int) {
	e.t.Helper()
	e.scale(app, replicas)
	e.until(fmt.Sprintf("%s scaled down to %d", app, replicas), time.Minute, false, nil, func() bool {
		total, running, _ := e.pods(app)
		return total == replicas && running == replicas
	}, nil)
}

// passes steps the world with disruption on for d, checking inv after
// every step (what nothing may do meanwhile).
func (e *env) passes(what string, d time.Duration, apps []string, inv func()) {
	e.t.Helper()
	deadline := time.Now().Add(d)
	e.until(what, time.Minute, true, apps, func() bool { return time.Now().After(deadline) }, inv)
}
