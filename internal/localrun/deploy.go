package localrun

import (
	"context"
	"fmt"
	"os"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// deployed is what deployStack created: the stack's resources, the
// functions' settings and the AWS configurations of their roles.
type deployed struct {
	stack *localcloud.Stack
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
	if s.Queues, err = createQueues(ctx, sqs.NewFromConfig(awsCfg), s.o.Name+"-"+suffix); err != nil {
		return nil, err
	}
	qs := s.Queues
	if err := localcloud.RouteInterruptionEvents(s.cloud.AWS, "", qs.InterruptionARN); err != nil {
		return nil, err
	}
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
	env[settings.EnvDisruptionSchedule] = s.o.Tick.String()
	s.closers = append(s.closers, setEnv(env))
	if s.Settings, err = settings.FromEnv(os.Getenv); err != nil {
		return nil, fmt.Errorf("function settings: %w", err)
	}
	s.printf("stack resources: DynamoDB table %s, SQS queues provision/work/interruption/disruption (+DLQs), 4 EventBridge rules -> interruption queue", s.Table)
	return st, nil
}
