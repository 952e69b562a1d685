package localrun

import (
	"context"
	"fmt"
	"os"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/lambdaspec"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// deployed is what deployStack created: the stack's resources, the
// functions' settings and the AWS configurations of their roles.
type deployed struct {
	stack *localcloud.Stack
	// spec is the stack's Lambda, SQS and EventBridge settings, from its
	// synthesized template.
	spec *lambdaspec.Spec
	// sqsClient polls as the controller role, as Lambda's event source
	// mappings poll with the function's role.
	sqsClient  *sqs.Client
	webhookCfg sdkaws.Config
}

// deployStack creates the table, queues and rules, deploys the stack's
// roles and applies the functions' environment to this process.
func (s *System) deployStack(ctx context.Context) (*deployed, error) {
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	s.Table = s.o.Name + "-" + suffix
	st := &deployed{}
	var err error
	if st.spec, err = lambdaspec.Load(ctx); err != nil {
		return nil, err
	}

	// The functions' environment is applied to this process: the AWS SDK's
	// default configuration reads it, as in Lambda.
	// The queues' URLs are added once they exist.
	base := functionEnv(s.cloud, s.Table, Queues{}, s.o.ConfigDir, "", time.Second)
	s.closers = append(s.closers, setEnv(base))
	awsCfg, err := settings.AWSConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if err := createTable(ctx, store.NewDynamoDBClient(awsCfg), s.Table); err != nil {
		return nil, err
	}
	if s.Queues, err = createQueues(ctx, sqs.NewFromConfig(awsCfg), st.spec, s.o.Name+"-"+suffix); err != nil {
		return nil, err
	}
	qs := s.Queues
	if err := localcloud.RouteInterruptionEvents(s.cloud.AWS, "", qs.InterruptionARN); err != nil {
		return nil, err
	}
	s.closers = append(s.closers, s.delayEvents(qs.InterruptionARN))
	// Each function signs its AWS calls as its role of the stack, under the
	// IAM policy `cdk synth` produced for it (when the cloud enforces IAM).
	st.stack, err = s.cloud.Deploy(localcloud.StackResources{Table: s.Table, ProvisionQueue: qs.ProvisionURL, WorkQueue: qs.WorkURL,
		InterruptionQueue: qs.InterruptionURL, DisruptionQueue: qs.DisruptionURL, NodeRole: s.o.NodeRole})
	if err != nil {
		return nil, err
	}
	ctrlCfg, webhookCfg := awsCfg.Copy(), awsCfg.Copy()
	ctrlCfg.Credentials, webhookCfg.Credentials = sdkaws.NewCredentialsCache(st.stack.Controller), sdkaws.NewCredentialsCache(st.stack.Webhook)
	st.sqsClient, st.webhookCfg = sqs.NewFromConfig(ctrlCfg), webhookCfg
	env := functionEnv(s.cloud, s.Table, qs, s.o.ConfigDir, randomSecret(), time.Second)
	// The disruption function wakes itself when the schedule would come
	// too late; it needs the schedule's period to tell.
	period, err := disruptionPeriod(st.spec, s.o.Tick)
	if err != nil {
		return nil, err
	}
	env[settings.EnvDisruptionSchedule] = period.String()
	s.closers = append(s.closers, setEnv(env))
	if s.Settings, err = settings.FromEnv(os.Getenv); err != nil {
		return nil, fmt.Errorf("function settings: %w", err)
	}
	s.printf("stack resources: DynamoDB table %s, SQS queues provision/work/interruption/disruption (+DLQs), 4 EventBridge rules -> interruption queue", s.Table)
	return st, nil
}

// disruptionPeriod is the local period of the disruption function's
// schedule (the stack sets its rate; Tick stands for its minute).
func disruptionPeriod(spec *lambdaspec.Spec, tick time.Duration) (time.Duration, error) {
	f, err := spec.Function("disruption")
	if err != nil {
		return 0, err
	}
	if len(f.Schedules) != 1 {
		return 0, fmt.Errorf("the disruption function has %d schedules, want 1", len(f.Schedules))
	}
	return schedulePeriod(f.Schedules[0], tick)
}
