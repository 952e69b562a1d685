package awssim

import (
	"encoding/json"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/nodewright/nodewright/internal/localcloud/awssim/iam"
)

// sqsBatchActions are authorized as the single-message action (the
// Service Authorization Reference lists no batch actions for SQS).
var sqsBatchActions = map[string]string{
	"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage",
	"ChangeMessageVisibilityBatch": "ChangeMessageVisibility",
}

// jsonTargets lists what a JSON-protocol request is authorized against.
func (s *Server) jsonTargets(service, op string, body []byte) []iam.Target {
	var in struct {
		QueueURL  string `json:"QueueUrl"`
		QueueName string `json:"QueueName"`
		Name      string `json:"Name"`
		Names     []string
		SecretID  string `json:"SecretId"`
	}
	_ = json.Unmarshal(body, &in) // a malformed body fails in the handler
	region, account := s.opts.Region, s.opts.AccountID
	switch service {
	case "sqs":
		if single, ok := sqsBatchActions[op]; ok {
			op = single
		}
		name := in.QueueName
		if in.QueueURL != "" {
			name = in.QueueURL[strings.LastIndex(in.QueueURL, "/")+1:]
		}
		if name == "" {
			return []iam.Target{{Action: "sqs:" + op, ARN: "*"}}
		}
		return []iam.Target{{Action: "sqs:" + op, Type: "queue", ARN: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", region, account, name)}}
	case "ssm":
		names := in.Names
		if in.Name != "" {
			names = append(names, in.Name)
		}
		var out []iam.Target
		for _, n := range names {
			out = append(out, iam.Target{Action: "ssm:" + op, Type: "parameter", ARN: ssmParameterARN(region, account, n)})
		}
		return out
	case "secretsmanager":
		id := in.SecretID
		if op == "CreateSecret" {
			id = in.Name
		}
		return []iam.Target{{Action: "secretsmanager:" + op, Type: "Secret", ARN: s.secretARN(id), Creating: op == "CreateSecret"}}
	case "events":
		return []iam.Target{{Action: "events:" + op, Type: "rule-on-default-event-bus", ARN: fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", region, account, in.Name)}}
	}
	return []iam.Target{{Action: service + ":" + op, ARN: "*"}}
}

// ssmParameterARN: AWS's public parameters (/aws/service/...) have no
// account in their ARN.
func ssmParameterARN(region, account, name string) string {
	if strings.HasPrefix(name, "/aws/") {
		account = ""
	}
	if !strings.HasPrefix(name, "/") {
		name = "/" + name
	}
	return fmt.Sprintf("arn:aws:ssm:%s:%s:parameter%s", region, account, name)
}

// secretARN is the ARN of a secret named by name or ARN; a secret that does
// not exist yet gets the ARN CreateSecret will give it.
func (s *Server) secretARN(id string) string {
	if strings.HasPrefix(id, "arn:") {
		return id
	}
	s.secrets.mu.Lock()
	sec := s.secrets.byID[id]
	s.secrets.mu.Unlock()
	if sec != nil {
		return sec.arn
	}
	return fmt.Sprintf("arn:aws:secretsmanager:%s:%s:secret:%s-AbCdEf", s.opts.Region, s.opts.AccountID, id)
}

// dynamoTargets lists the tables and indexes a DynamoDB request touches.
func (s *Server) dynamoTargets(op string, body []byte) []iam.Target {
	var in struct {
		TableName     string
		IndexName     string
		RequestItems  map[string]json.RawMessage
		TransactItems []map[string]struct{ TableName string }
	}
	_ = json.Unmarshal(body, &in)
	table := func(name string) string {
		return fmt.Sprintf("arn:aws:dynamodb:%s:%s:table/%s", s.opts.Region, s.opts.AccountID, name)
	}
	action := "dynamodb:" + op
	var out []iam.Target
	switch {
	case in.IndexName != "":
		out = append(out, iam.Target{Action: action, Type: "index", ARN: table(in.TableName) + "/index/" + in.IndexName})
	case in.TableName != "":
		out = append(out, iam.Target{Action: action, Type: "table", ARN: table(in.TableName)})
	case len(in.RequestItems) > 0:
		names := make([]string, 0, len(in.RequestItems))
		for n := range in.RequestItems {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out = append(out, iam.Target{Action: action, Type: "table", ARN: table(n)})
		}
	case len(in.TransactItems) > 0:
		// Each item is authorized as its own action (PutItem, UpdateItem,
		// DeleteItem, ConditionCheckItem) on its table.
		for _, item := range in.TransactItems {
			for kind, v := range item {
				single := map[string]string{"Put": "PutItem", "Update": "UpdateItem", "Delete": "DeleteItem", "ConditionCheck": "ConditionCheckItem", "Get": "GetItem"}[kind]
				out = append(out, iam.Target{Action: "dynamodb:" + single, Type: "table", ARN: table(v.TableName)})
			}
		}
	default:
		out = append(out, iam.Target{Action: action, ARN: "*"})
	}
	return out
}

// eksTargets: DescribeCluster is authorized against the cluster.
func (s *Server) eksTargets(name string) []iam.Target {
	return []iam.Target{{Action: "eks:DescribeCluster", Type: "cluster", ARN: fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", s.opts.Region, s.opts.AccountID, url.PathEscape(name))}}
}
