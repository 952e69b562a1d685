package eventsim

import (
	"encoding/json"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// Handle runs one EventBridge JSON 1.1 operation.
func (b *Bus) Handle(op string, body []byte) (any, error) {
	var in struct {
		Name, Rule, EventPattern, State, Description, ScheduleExpression, EventBusName string
		Targets                                                                        []Target
		Ids                                                                            []string
		Entries                                                                        []struct {
			Source, DetailType, Detail, EventBusName string
			Resources                                []string
			Time                                     *float64
		}
	}
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, protocol.Errorf("SerializationException", "invalid JSON body: %v", err)
	}
	if in.EventBusName != "" && in.EventBusName != "default" {
		return nil, protocol.Errorf("ResourceNotFoundException", "Event bus %s does not exist.", in.EventBusName)
	}
	switch op {
	case "PutRule":
		if in.ScheduleExpression != "" {
			return nil, protocol.Errorf("ValidationException", "scheduled rules are not simulated; drive schedules from the test")
		}
		arn, err := b.PutRule(in.Name, in.EventPattern)
		if err != nil {
			return nil, err
		}
		b.mu.Lock()
		r := b.rules[in.Name]
		r.Description = in.Description
		if in.State != "" {
			r.State = in.State
		}
		b.mu.Unlock()
		return map[string]string{"RuleArn": arn}, nil
	case "PutTargets":
		if err := b.PutTargets(in.Rule, in.Targets...); err != nil {
			return nil, err
		}
		return map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}}, nil
	case "DescribeRule":
		b.mu.Lock()
		defer b.mu.Unlock()
		r := b.rules[in.Name]
		if r == nil {
			return nil, protocol.Errorf("ResourceNotFoundException", "Rule %s does not exist.", in.Name)
		}
		return map[string]string{"Name": r.Name, "Arn": b.ruleARN(r.Name), "EventPattern": r.EventPattern, "State": r.State, "Description": r.Description, "EventBusName": "default"}, nil
	case "DeleteRule":
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.rules, in.Name)
		return struct{}{}, nil
	case "RemoveTargets":
		b.mu.Lock()
		defer b.mu.Unlock()
		if r := b.rules[in.Rule]; r != nil {
			keep := r.Targets[:0]
			for _, t := range r.Targets {
				drop := false
				for _, id := range in.Ids {
					drop = drop || id == t.Id
				}
				if !drop {
					keep = append(keep, t)
				}
			}
			r.Targets = keep
		}
		return map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}}, nil
	case "PutEvents":
		if len(in.Entries) == 0 || len(in.Entries) > 10 {
			return nil, protocol.Errorf("ValidationException", "PutEvents takes 1 to 10 entries, got %d", len(in.Entries))
		}
		failed := 0
		var entries []map[string]string
		for _, e := range in.Entries {
			ev := Event{Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, Resources: e.Resources}
			if e.Time != nil {
				ev.Time = time.Unix(int64(*e.Time), 0)
			}
			if e.Source == "" || e.DetailType == "" {
				failed++
				entries = append(entries, map[string]string{"ErrorCode": "InvalidArgument", "ErrorMessage": "Parameters Source and DetailType are required."})
				continue
			}
			id, err := b.Publish(ev)
			if err != nil && id == "" {
				failed++
				entries = append(entries, map[string]string{"ErrorCode": "MalformedDetail", "ErrorMessage": "Detail is malformed."})
				continue
			}
			entries = append(entries, map[string]string{"EventId": id})
		}
		return map[string]any{"FailedEntryCount": failed, "Entries": entries}, nil
	}
	return nil, protocol.Errorf("UnknownOperationException", "operation %s is not simulated", op)
}
