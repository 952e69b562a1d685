package infra

import (
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"

	"github.com/nodewright/nodewright/internal/settings"
)

func TestTable(t *testing.T) {
	_, tpl, _ := full(t)
	check(t, "table", func() {
		tpl.HasResource(jsii.String("AWS::DynamoDB::Table"), map[string]interface{}{
			"DeletionPolicy":      "Retain",
			"UpdateReplacePolicy": "Retain",
			"Properties": map[string]interface{}{
				"BillingMode": "PAY_PER_REQUEST",
				"KeySchema": []interface{}{
					map[string]interface{}{"AttributeName": "pk", "KeyType": "HASH"},
					map[string]interface{}{"AttributeName": "sk", "KeyType": "RANGE"},
				},
				"PointInTimeRecoverySpecification": map[string]interface{}{"PointInTimeRecoveryEnabled": true},
				"TimeToLiveSpecification":          map[string]interface{}{"AttributeName": "expiresAt", "Enabled": true},
				"SSESpecification":                 map[string]interface{}{"SSEEnabled": true},
				"DeletionProtectionEnabled":        true,
				"GlobalSecondaryIndexes": assertions.Match_ArrayWith(&[]interface{}{
					map[string]interface{}{
						"IndexName":  "by-instance",
						"KeySchema":  []interface{}{map[string]interface{}{"AttributeName": "gsi1pk", "KeyType": "HASH"}, map[string]interface{}{"AttributeName": "gsi1sk", "KeyType": "RANGE"}},
						"Projection": map[string]interface{}{"ProjectionType": "ALL"},
					},
					map[string]interface{}{
						"IndexName":  "by-nodepool",
						"KeySchema":  []interface{}{map[string]interface{}{"AttributeName": "gsi2pk", "KeyType": "HASH"}, map[string]interface{}{"AttributeName": "gsi2sk", "KeyType": "RANGE"}},
						"Projection": map[string]interface{}{"ProjectionType": "ALL"},
					},
				}),
			},
		})
	})
}

func TestQueuesAndRules(t *testing.T) {
	_, tpl, j := full(t)
	check(t, "eight sqs queues", func() { tpl.ResourceCountIs(jsii.String("AWS::SQS::Queue"), jsii.Number(8)) })
	check(t, "interruption queue", func() {
		tpl.HasResourceProperties(jsii.String("AWS::SQS::Queue"), map[string]interface{}{
			"MessageRetentionPeriod": 300,
			"SqsManagedSseEnabled":   true,
			"VisibilityTimeout":      60,
			"RedrivePolicy":          map[string]interface{}{"maxReceiveCount": 3, "deadLetterTargetArn": assertions.Match_AnyValue()},
		})
	})
	for _, q := range resources(j, "AWS::SQS::Queue") {
		if q.Props["SqsManagedSseEnabled"] != true {
			t.Errorf("queue %s is not encrypted", q.ID)
		}
	}
	for _, detail := range []string{"EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation", "EC2 Instance State-change Notification", "AWS Health Event",
		"EC2 Capacity Reservation Instance Interruption Warning"} {
		check(t, "rule "+detail, func() {
			tpl.HasResourceProperties(jsii.String("AWS::Events::Rule"), map[string]interface{}{
				"EventPattern": assertions.Match_ObjectLike(&map[string]interface{}{"detail-type": []interface{}{detail}}),
				"State":        "ENABLED",
				"Targets":      []interface{}{assertions.Match_ObjectLike(&map[string]interface{}{"Arn": map[string]interface{}{"Fn::GetAtt": []interface{}{logicalID(t, j, "AWS::SQS::Queue", "InterruptionQueue"), "Arn"}}})},
			})
		})
	}

	// The queue policy lets in only the five rules.
	iq := logicalID(t, j, "AWS::SQS::Queue", "InterruptionQueue")
	var ruleArns []string
	for _, r := range resources(j, "AWS::Events::Rule") {
		if r.Props["EventPattern"] != nil {
			ruleArns = append(ruleArns, js(map[string]interface{}{"Fn::GetAtt": []interface{}{r.ID, "Arn"}}))
		}
	}
	if len(ruleArns) != 5 {
		t.Fatalf("interruption rules = %d, want 5", len(ruleArns))
	}
	var allowed []string
	for _, p := range resources(j, "AWS::SQS::QueuePolicy") {
		if !strings.Contains(js(p.Props["Queues"]), iq) {
			continue
		}
		for _, s := range statements(map[string]interface{}{"Resources": map[string]interface{}{p.ID: p.Raw}}) {
			if s.Effect != "Allow" {
				continue
			}
			src := s.cond("ArnEquals", "aws:SourceArn")
			if src == nil {
				t.Errorf("queue policy statement without aws:SourceArn: %+v", s)
				continue
			}
			if js(s.Principal) != `{"Service":"events.amazonaws.com"}` {
				t.Errorf("queue policy principal %s, want events.amazonaws.com", js(s.Principal))
			}
			allowed = append(allowed, js(src))
		}
	}
	sort.Strings(allowed)
	sort.Strings(ruleArns)
	if strings.Join(allowed, ",") != strings.Join(ruleArns, ",") {
		t.Errorf("queue policy allows %v, want exactly the rules %v", allowed, ruleArns)
	}
}

func fnByName(t *testing.T, j map[string]interface{}, name string) resource {
	t.Helper()
	id := logicalID(t, j, "AWS::Lambda::Function", exportID(name)+"Function")
	for _, r := range resources(j, "AWS::Lambda::Function") {
		if r.ID == id {
			return r
		}
	}
	panic("unreachable")
}

func TestFunctions(t *testing.T) {
	_, tpl, j := full(t)
	check(t, "six functions", func() {
		tpl.ResourceCountIs(jsii.String("AWS::Lambda::Function"), jsii.Number(float64(len(Functions))))
	})
	for _, name := range Functions {
		f := fnByName(t, j, name)
		p := f.Props
		if p["Runtime"] != "provided.al2023" || js(p["Architectures"]) != `["arm64"]` || p["Handler"] != "bootstrap" {
			t.Errorf("%s: runtime %v arch %v handler %v", name, p["Runtime"], p["Architectures"], p["Handler"])
		}
		if lc, _ := p["LoggingConfig"].(map[string]interface{}); lc["LogFormat"] != "JSON" || lc["LogGroup"] == nil {
			t.Errorf("%s: logging config %v", name, js(p["LoggingConfig"]))
		}
		size := Sizing[name]
		if p["MemorySize"] != float64(size.MemoryMB) || p["Timeout"] != float64(size.TimeoutSeconds) {
			t.Errorf("%s: memory %v timeout %v", name, p["MemorySize"], p["Timeout"])
		}
		reserved, _ := p["ReservedConcurrentExecutions"].(float64)
		if int(reserved) != size.ReservedConcurrency || (name == "disruption") != (reserved == 1) {
			t.Errorf("%s: reserved concurrency %v", name, reserved)
		}
		inVPC := p["VpcConfig"] != nil
		if inVPC != size.InVPC {
			t.Errorf("%s: in VPC = %v, want %v", name, inVPC, size.InVPC)
		}
		env := js(p["Environment"])
		for _, k := range []string{settings.EnvClusterName, settings.EnvLogLevel} {
			if !strings.Contains(env, `"`+k+`"`) {
				t.Errorf("%s: env lacks %s", name, k)
			}
		}
		controller := name != "webhook" && name != "webhookregistrar"
		if controller {
			for _, k := range []string{settings.EnvTableName, settings.EnvConfigDir, settings.EnvInterruptionQueue, settings.EnvWorkQueueURL,
				settings.EnvProvisionQueueURL, settings.EnvRebalance, settings.EnvInstanceProfile, settings.EnvNodeRoleARN, settings.EnvNodeRoleName,
				settings.EnvOwner} {
				if !strings.Contains(env, `"`+k+`"`) {
					t.Errorf("%s: env lacks %s", name, k)
				}
			}
		}
		// Every name the stack sets is one the functions read.
		for k := range p["Environment"].(map[string]interface{})["Variables"].(map[string]interface{}) {
			if !strings.HasPrefix(k, "NODEWRIGHT_") {
				t.Errorf("%s: env %s is not a settings name", name, k)
			}
		}
		if got := len(asList(p["Layers"])); (got == 1) != controller {
			t.Errorf("%s: %d layers, want the config layer on controllers only", name, got)
		}
	}
	if env := js(fnByName(t, j, "webhook").Props["Environment"]); !strings.Contains(env, settings.EnvWebhookSecretARN) || !strings.Contains(env, settings.EnvProvisionQueueURL) ||
		!strings.Contains(env, `"`+settings.EnvWebhookPrefix+`":"/admit/"`) || strings.Contains(env, settings.EnvInterruptionQueue) || strings.Contains(env, `"`+settings.EnvWebhookSecret+`"`) {
		t.Errorf("webhook env = %s", env)
	}
	check(t, "log groups with retention", func() {
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::Logs::LogGroup"), map[string]interface{}{"RetentionInDays": 30}, jsii.Number(float64(len(Functions))))
	})
	check(t, "sqs event sources", func() {
		tpl.ResourcePropertiesCountIs(jsii.String("AWS::Lambda::EventSourceMapping"), map[string]interface{}{
			"BatchSize": 10, "FunctionResponseTypes": []interface{}{"ReportBatchItemFailures"},
		}, jsii.Number(4))
	})
	for _, m := range resources(j, "AWS::Lambda::EventSourceMapping") {
		src, fn := js(m.Props["EventSourceArn"]), js(m.Props["FunctionName"])
		switch {
		case strings.Contains(src, "InterruptionQueue") && strings.Contains(fn, "InterruptionFunction"):
		case strings.Contains(src, "WorkQueue") && strings.Contains(fn, "LifecycleFunction"):
		case strings.Contains(src, "ProvisionQueue") && strings.Contains(fn, "ProvisionerFunction"):
		case strings.Contains(src, "DisruptionQueue") && strings.Contains(fn, "DisruptionFunction"):
		default:
			t.Errorf("unexpected event source mapping %s -> %s", src, fn)
		}
	}
	schedules := 0
	for _, r := range resources(j, "AWS::Events::Rule") {
		if r.Props["ScheduleExpression"] == nil {
			continue
		}
		if strings.HasPrefix(r.ID, "WebhookSecretRotation") {
			if r.Props["ScheduleExpression"] != "rate(7 days)" {
				t.Errorf("%s: schedule %v, want the default rotation's rate(7 days)", r.ID, r.Props["ScheduleExpression"])
			}
			continue
		}
		schedules++
		if r.Props["ScheduleExpression"] != "rate(1 minute)" {
			t.Errorf("%s: schedule %v", r.ID, r.Props["ScheduleExpression"])
		}
	}
	if schedules != 3 {
		t.Errorf("schedules = %d, want 3 (provisioner, lifecycle, disruption)", schedules)
	}
	check(t, "layer", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::LayerVersion"), map[string]interface{}{
			"CompatibleArchitectures": []interface{}{"arm64"}, "CompatibleRuntimes": []interface{}{"provided.al2023"},
		})
	})
	check(t, "provisioner async config", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::EventInvokeConfig"), map[string]interface{}{"MaximumRetryAttempts": 0, "MaximumEventAgeInSeconds": 60})
	})
	check(t, "cluster ingress from functions", func() {
		tpl.HasResourceProperties(jsii.String("AWS::EC2::SecurityGroupIngress"), map[string]interface{}{
			"GroupId": "sg-0123456789abcdef0", "FromPort": 443, "ToPort": 443, "IpProtocol": "tcp",
		})
	})
}

func TestWebhook(t *testing.T) {
	_, tpl, j := full(t)
	check(t, "function url", func() {
		tpl.HasResourceProperties(jsii.String("AWS::Lambda::Url"), map[string]interface{}{"AuthType": "NONE"})
	})
	check(t, "secret", func() {
		tpl.HasResourceProperties(jsii.String("AWS::SecretsManager::Secret"), map[string]interface{}{
			"GenerateSecretString": map[string]interface{}{"PasswordLength": 48, "ExcludePunctuation": true, "IncludeSpace": false},
		})
	})
	regID := logicalID(t, j, "AWS::Lambda::Function", "WebhookregistrarFunction")
	check(t, "registration custom resource", func() {
		tpl.HasResource(jsii.String("Custom::NodewrightWebhook"), map[string]interface{}{
			"Properties": map[string]interface{}{
				"ServiceToken":   map[string]interface{}{"Fn::GetAtt": []interface{}{regID, "Arn"}},
				"ClusterName":    testCluster,
				"WebhookName":    "nodewright-example",
				"PathPrefix":     WebhookPathPrefix,
				"CABundle":       assertions.Match_StringLikeRegexp(jsii.String("BEGIN CERTIFICATE")),
				"ServiceTimeout": "300",
			},
			"DependsOn": assertions.Match_ArrayWith(&[]interface{}{logicalID(t, j, "AWS::EKS::AccessEntry", "WebhookRegistrarAccessEntry")}),
		})
	})
	if strings.Count(amazonRootCAs, "BEGIN CERTIFICATE") != 4 {
		t.Errorf("embedded CA bundle has %d certificates, want Amazon Root CA 1-4", strings.Count(amazonRootCAs, "BEGIN CERTIFICATE"))
	}
}

// The other shape: public endpoint, no webhook, RBAC access, an existing
// alarm topic, environment-agnostic.
func TestMinimalStack(t *testing.T) {
	cfg := baseConfig(t)
	cfg.Webhook = false
	cfg.EKSAccess = AccessRBAC
	cfg.AlarmTopicArn = "arn:aws:sns:eu-west-1:111122223333:ops"
	cfg.Rebalance = RebalanceReplace
	cfg.LogRetentionDays = 7
	cfg.DisruptionRateMinutes = 5
	s, j := synthTemplate(t, cfg)
	if n := len(resources(j, "AWS::Lambda::Url")) + len(resources(j, "Custom::NodewrightWebhook")) + len(resources(j, "AWS::SecretsManager::Secret")); n != 0 {
		t.Errorf("webhook off but %d webhook resources", n)
	}
	// Without the webhook the registrar still applies the controllers' RBAC.
	if n := len(resources(j, "AWS::EKS::AccessEntry")); n != 3 {
		t.Fatalf("access entries = %d, want node, controller and registrar", n)
	}
	checkAccess(t, j, false)
	for _, f := range resources(j, "AWS::Lambda::Function") {
		if f.Props["VpcConfig"] != nil {
			t.Errorf("%s in a VPC without vpcId", f.ID)
		}
		if env := js(f.Props["Environment"]); strings.Contains(env, settings.EnvRebalance) && !strings.Contains(env, `"`+settings.EnvRebalance+`":"replace"`) {
			t.Errorf("%s: rebalance env %s", f.ID, env)
		}
	}
	var rates []string
	for _, r := range resources(j, "AWS::Events::Rule") {
		if e, ok := r.Props["ScheduleExpression"].(string); ok {
			rates = append(rates, e)
		}
	}
	sort.Strings(rates)
	if strings.Join(rates, ",") != "rate(1 minute),rate(1 minute),rate(5 minutes)" {
		t.Errorf("schedules = %v", rates)
	}
	if env := js(fnByName(t, j, "disruption").Props["Environment"]); !strings.Contains(env, `"`+settings.EnvDisruptionSchedule+`":"5m"`) {
		t.Errorf("disruption env does not give its 5-minute schedule: %s", env)
	}
	for _, lg := range resources(j, "AWS::Logs::LogGroup") {
		if lg.Props["RetentionInDays"] != float64(7) {
			t.Errorf("%s retention %v", lg.ID, lg.Props["RetentionInDays"])
		}
	}
	for _, a := range resources(j, "AWS::CloudWatch::Alarm") {
		if js(a.Props["AlarmActions"]) != `["arn:aws:sns:eu-west-1:111122223333:ops"]` {
			t.Errorf("%s actions %s", a.ID, js(a.Props["AlarmActions"]))
		}
	}
	for _, e := range nagErrors(t, s.Stack) {
		t.Errorf("unsuppressed cdk-nag finding: %s", e)
	}
}

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
