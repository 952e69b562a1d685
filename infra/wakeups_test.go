package infra

import (
	"slices"
	"strings"
	"testing"

	"github.com/nodewright/nodewright/internal/settings"
)

// The disruption queue: encrypted like every queue, with a DLQ, feeding the
// disruption function (and only it) through an event source mapping with
// batch item failures; only the disruption function is told its URL and
// the schedule's period.
func TestDisruptionWakeupQueue(t *testing.T) {
	_, _, j := full(t)
	dq := logicalID(t, j, "AWS::SQS::Queue", "DisruptionQueue")
	dlq := logicalID(t, j, "AWS::SQS::Queue", "DisruptionDLQ")
	for _, q := range resources(j, "AWS::SQS::Queue") {
		if q.ID != dq {
			continue
		}
		rp, _ := q.Props["RedrivePolicy"].(map[string]interface{})
		if q.Props["SqsManagedSseEnabled"] != true || q.Props["VisibilityTimeout"] != float64(Sizing["disruption"].TimeoutSeconds) ||
			!strings.Contains(js(rp["deadLetterTargetArn"]), dlq) || rp["maxReceiveCount"] != float64(disruptionMaxReceives) {
			t.Errorf("disruption queue = %s", js(q.Props))
		}
	}
	mappings := 0
	for _, m := range resources(j, "AWS::Lambda::EventSourceMapping") {
		if strings.Contains(js(m.Props["EventSourceArn"]), dq) {
			mappings++
			if !strings.Contains(js(m.Props["FunctionName"]), "DisruptionFunction") || js(m.Props["FunctionResponseTypes"]) != `["ReportBatchItemFailures"]` {
				t.Errorf("disruption queue mapping = %s", js(m.Props))
			}
		}
	}
	if mappings != 1 {
		t.Errorf("%d event source mappings on the disruption queue, want 1", mappings)
	}
	for _, fn := range Functions {
		env := js(fnByName(t, j, fn).Props["Environment"])
		has := strings.Contains(env, `"`+settings.EnvDisruptionQueueURL+`"`) && strings.Contains(env, `"`+settings.EnvDisruptionSchedule+`":"1m"`)
		if has != (fn == "disruption") || strings.Contains(env, settings.EnvDisruptionQueueURL) != (fn == "disruption") {
			t.Errorf("%s: env %s", fn, env)
		}
	}
}

// Only the controller role reaches the disruption queue, with exactly
// SendMessage (the disruption function's wake-ups) and what its event
// source mapping needs to consume them, in statements naming only the
// stack's queues.
func TestDisruptionQueueGrants(t *testing.T) {
	_, _, j := full(t)
	dq := logicalID(t, j, "AWS::SQS::Queue", "DisruptionQueue")
	ctrl := logicalID(t, j, "AWS::IAM::Role", "ControllerRole")
	queues := map[string]bool{}
	for _, q := range resources(j, "AWS::SQS::Queue") {
		queues[js(map[string]interface{}{"Fn::GetAtt": []interface{}{q.ID, "Arn"}})] = true
	}
	var actions []string
	for _, p := range resources(j, "AWS::IAM::Policy") {
		for _, s := range statements(map[string]interface{}{"Resources": map[string]interface{}{p.ID: p.Raw}}) {
			if !strings.Contains(js(s.Resources), dq) {
				continue
			}
			if js(p.Props["Roles"]) != `[{"Ref":"`+ctrl+`"}]` {
				t.Errorf("%s grants %v on the disruption queue to %s", p.ID, s.Actions, js(p.Props["Roles"]))
			}
			// CDK merges grants with the same actions; every other resource
			// of such a statement must be another of the stack's queues.
			for _, r := range s.Resources {
				if !queues[js(r)] {
					t.Errorf("%s: %v on %s, not one of the stack's queues", p.ID, s.Actions, js(r))
				}
			}
			actions = append(actions, s.Actions...)
		}
	}
	slices.Sort(actions)
	want := []string{"sqs:ChangeMessageVisibility", "sqs:DeleteMessage", "sqs:GetQueueAttributes", "sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:SendMessage"}
	if got := slices.Compact(actions); !slices.Equal(got, want) {
		t.Errorf("actions on the disruption queue = %v, want %v", got, want)
	}
}
