package eventsim

import (
	"encoding/json"
	"time"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/protocol"
)

// request is the union of the EventBridge operations' JSON inputs.
type request struct {
	Name, Rule, EventPattern, State, Description, ScheduleExpression, EventBusName string
	Targets                                                                        []Target
	Ids                                                                            []string
	Entries                                                                        []eventEntry
}

// eventEntry is one PutEvents entry.
type eventEntry struct {
	Source, DetailType, Detail, EventBusName string
	Resources                                []string
	Time                                     *float64
}

// Handle runs one EventBridge JSON 1.1 operation.
func (b *Bus) Handle(op string, body []byte) (any, error) {
	var in request
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, protocol.Errorf("SerializationException", "invalid JSON body: %v", err)
	}
	if in.EventBusName != "" && in.EventBusName != "default" {
		return nil, protocol.Errorf("ResourceNotFoundException", "Event bus %s does not exist.", in.EventBusName)
	}
	switch op {
	case "PutRule":
		return b.putRuleAPI(&in)
	case "PutTargets":
		if err := b.PutTargets(in.Rule, in.Targets...); err != nil {
			return nil, err
		}
		return map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}}, nil
	case "DescribeRule":
		return b.describeRule(in.Name)
	case "DeleteRule":
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.rules, in.Name)
		return struct{}{}, nil
	case "RemoveTargets":
		b.removeTargets(in.Rule, in.Ids)
		return map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}}, nil
	case "PutEvents":
		return b.putEvents(in.Entries)
	}
	return nil, protocol.Errorf("UnknownOperationException", "operation %s is not simulated", op)
}

func (b *Bus) putRuleAPI(in *request) (any, error) {
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
}

func (b *Bus) describeRule(name string) (any, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.rules[name]
	if r == nil {
		return nil, protocol.Errorf("ResourceNotFoundException", "Rule %s does not exist.", name)
	}
	return map[string]string{"Name": r.Name, "Arn": b.ruleARN(r.Name), "EventPattern": r.EventPattern, "State": r.State, "Description": r.Description, "EventBusName": "default"}, nil
}

func (b *Bus) removeTargets(rule string, ids []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r := b.rules[rule]; r != nil {
		keep := r.Targets[:0]
		for _, t := range r.Targets {
			drop := false
			for _, id := range ids {
				drop = drop || id == t.Id
			}
			if !drop {
				keep = append(keep, t)
			}
		}
		r.Targets = keep
	}
}

func (b *Bus) putEvents(in []eventEntry) (any, error) {
	if len(in) == 0 || len(in) > 10 {
		return nil, protocol.Errorf("ValidationException", "PutEvents takes 1 to 10 entries, got %d", len(in))
	}
	failed := 0
	var entries []map[string]string
	for _, e := range in {
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
