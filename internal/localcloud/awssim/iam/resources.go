package iam

import (
	"fmt"
	"strings"
)

// ref resolves Ref: a pseudo parameter or a resource's physical ID, which
// CloudFormation defines per resource type.
func (r resolver) ref(name string) (string, error) {
	switch name {
	case "AWS::Partition":
		return r.b.Partition, nil
	case "AWS::Region":
		return r.b.Region, nil
	case "AWS::AccountId":
		return r.b.Account, nil
	case "AWS::URLSuffix":
		return "amazonaws.com", nil
	case "AWS::StackName":
		return r.b.StackName, nil
	}
	res, ok := r.t.resources[name]
	if !ok {
		return "", fmt.Errorf("Ref %s: no such resource or pseudo parameter", name) //nolint:staticcheck // ST1005: Ref is the CloudFormation intrinsic, spelled as in the template (like Fn::GetAtt below)
	}
	switch res.Type {
	case "AWS::SecretsManager::Secret", "AWS::IAM::ManagedPolicy":
		return r.attr(name, "Arn")
	case "AWS::SQS::Queue":
		return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", r.b.Region, r.b.Account, r.physicalName(name)), nil
	}
	return r.physicalName(name), nil
}

// attr resolves Fn::GetAtt for the attributes nodewright's template uses.
func (r resolver) attr(id, attr string) (string, error) {
	res, ok := r.t.resources[id]
	if !ok {
		return "", fmt.Errorf("Fn::GetAtt %s.%s: no such resource", id, attr)
	}
	if phys := r.b.Physical[ConstructID(id)]; strings.HasPrefix(phys, "arn:") && attr == "Arn" {
		return phys, nil
	}
	name := r.physicalName(id)
	p, reg, acct := r.b.Partition, r.b.Region, r.b.Account
	arns := map[string]string{
		"AWS::DynamoDB::Table":        fmt.Sprintf("arn:%s:dynamodb:%s:%s:table/%s", p, reg, acct, name),
		"AWS::SQS::Queue":             fmt.Sprintf("arn:%s:sqs:%s:%s:%s", p, reg, acct, name),
		"AWS::IAM::Role":              fmt.Sprintf("arn:%s:iam::%s:role/%s", p, acct, name),
		"AWS::IAM::InstanceProfile":   fmt.Sprintf("arn:%s:iam::%s:instance-profile/%s", p, acct, name),
		"AWS::IAM::ManagedPolicy":     fmt.Sprintf("arn:%s:iam::%s:policy/%s", p, acct, name),
		"AWS::Logs::LogGroup":         fmt.Sprintf("arn:%s:logs:%s:%s:log-group:%s:*", p, reg, acct, name),
		"AWS::Lambda::Function":       fmt.Sprintf("arn:%s:lambda:%s:%s:function:%s", p, reg, acct, name),
		"AWS::SecretsManager::Secret": fmt.Sprintf("arn:%s:secretsmanager:%s:%s:secret:%s", p, reg, acct, name),
		"AWS::Events::Rule":           fmt.Sprintf("arn:%s:events:%s:%s:rule/%s", p, reg, acct, name),
	}
	switch attr {
	case "Arn":
		if a, ok := arns[res.Type]; ok {
			return a, nil
		}
	case "QueueName", "Name":
		return name, nil
	case "QueueUrl":
		return r.ref(id)
	case "StreamArn":
		if res.Type == "AWS::DynamoDB::Table" {
			return arns[res.Type] + "/stream/local", nil
		}
	}
	return "", fmt.Errorf("Fn::GetAtt %s.%s: attribute of %s the local cloud does not resolve", id, attr, res.Type)
}

// nameProperty is the property that names a resource of each type, when
// the template sets it.
var nameProperty = map[string]string{
	"AWS::DynamoDB::Table":        "TableName",
	"AWS::SQS::Queue":             "QueueName",
	"AWS::IAM::Role":              "RoleName",
	"AWS::IAM::InstanceProfile":   "InstanceProfileName",
	"AWS::IAM::ManagedPolicy":     "ManagedPolicyName",
	"AWS::Logs::LogGroup":         "LogGroupName",
	"AWS::Lambda::Function":       "FunctionName",
	"AWS::SecretsManager::Secret": "Name",
	"AWS::Events::Rule":           "Name",
}

// physicalName is the binding's name for a resource, else the name the
// template gives it, else one no real resource has.
func (r resolver) physicalName(id string) string {
	construct := ConstructID(id)
	if phys, ok := r.b.Physical[construct]; ok {
		if strings.HasPrefix(phys, "arn:") {
			return phys[strings.LastIndexAny(phys, ":/")+1:]
		}
		return phys
	}
	res := r.t.resources[id]
	if prop, ok := nameProperty[res.Type]; ok {
		if n, ok := res.Properties[prop].(string); ok {
			return r.replace(n)
		}
	}
	return fmt.Sprintf("%s-%s-unbound", r.b.StackName, construct)
}
