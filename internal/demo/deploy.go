package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// setup creates what the CDK stack would (table, queues, rules, the
// functions' configuration), builds the functions and starts feeding them
// events.
func (d *run) setup(ctx context.Context) error {
	st, err := d.deployStack(ctx)
	if err != nil {
		return err
	}
	if err := d.loadConfig(st.configDir); err != nil {
		return err
	}
	h, err := d.buildFunctions(ctx, st)
	if err != nil {
		return err
	}
	if err := d.startWebhookFunction(ctx, st); err != nil {
		return err
	}
	d.startEventSources(ctx, st, h)
	return nil
}

// deployed is what deployStack created: the stack's resources, the
// functions' settings and the AWS configurations of their roles.
type deployed struct {
	table, configDir string
	qs               queueSet
	stack            *localcloud.Stack
	settings         settings.Settings
	// sqsClient polls as the controller role, as Lambda's event source
	// mappings poll with the function's role.
	sqsClient  *sqs.Client
	webhookCfg sdkaws.Config
}

// deployStack writes the functions' configuration, creates the table,
// queues and rules, deploys the stack's roles and applies the functions'
// environment to this process.
func (d *run) deployStack(ctx context.Context) (*deployed, error) {
	suffix := fmt.Sprintf("%x", time.Now().UnixNano()&0xffffff)
	st := &deployed{table: "nodewright-demo-" + suffix}
	configDir, err := os.MkdirTemp("", "nodewright-demo-config-")
	if err != nil {
		return nil, err
	}
	st.configDir = configDir
	d.closers = append(d.closers, func() { _ = os.RemoveAll(configDir) })
	if err := writeConfig(configDir, d.cloud.ClusterName, d.o.ConsolidationPolicy); err != nil {
		return nil, fmt.Errorf("write the demo NodePool/EC2NodeClass: %w", err)
	}

	// The functions' environment is applied to this process: the AWS SDK's
	// default configuration reads it, as in Lambda.
	// The queues' URLs are added once they exist.
	base := functionEnv(d.cloud, st.table, queueSet{}, configDir, "", time.Second)
	d.closers = append(d.closers, setEnv(base))
	awsCfg, err := settings.AWSConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("AWS configuration: %w", err)
	}
	if err := createTable(ctx, store.NewDynamoDBClient(awsCfg), st.table); err != nil {
		return nil, err
	}
	if st.qs, err = createQueues(ctx, sqs.NewFromConfig(awsCfg), "nodewright-demo-"+suffix); err != nil {
		return nil, err
	}
	if err := localcloud.RouteInterruptionEvents(d.cloud.AWS, "", st.qs.InterruptionARN); err != nil {
		return nil, err
	}
	// Each function signs its AWS calls as its role of the stack, under the
	// IAM policy `cdk synth` produced for it (when the cloud enforces IAM).
	qs := st.qs
	st.stack, err = d.cloud.Deploy(localcloud.StackResources{Table: st.table, ProvisionQueue: qs.ProvisionURL, WorkQueue: qs.WorkURL,
		InterruptionQueue: qs.InterruptionURL, DisruptionQueue: qs.DisruptionURL})
	if err != nil {
		return nil, err
	}
	ctrlCfg, webhookCfg := awsCfg.Copy(), awsCfg.Copy()
	ctrlCfg.Credentials, webhookCfg.Credentials = sdkaws.NewCredentialsCache(st.stack.Controller), sdkaws.NewCredentialsCache(st.stack.Webhook)
	st.sqsClient, st.webhookCfg = sqs.NewFromConfig(ctrlCfg), webhookCfg
	secret := randomSecret()
	batchIdle := time.Second
	env := functionEnv(d.cloud, st.table, qs, configDir, secret, batchIdle)
	// The disruption function wakes itself when the schedule would come
	// too late; it needs the schedule's period to tell.
	env[settings.EnvDisruptionSchedule] = d.o.Tick.String()
	d.closers = append(d.closers, setEnv(env))
	if st.settings, err = settings.FromEnv(os.Getenv); err != nil {
		return nil, fmt.Errorf("function settings: %w", err)
	}
	d.tl.printf("stack resources: DynamoDB table %s, SQS queues provision/work/interruption/disruption (+DLQs), 4 EventBridge rules -> interruption queue", st.table)
	return st, nil
}

// loadConfig loads the demo's NodePool and EC2NodeClass as the functions
// will, and prints the pool's disruption settings.
func (d *run) loadConfig(configDir string) error {
	cfg, err := apis.Load(configDir)
	if err != nil {
		return fmt.Errorf("load the demo configuration: %w", err)
	}
	np := cfg.NodePool("default")
	if np == nil {
		return errors.New("the demo configuration has no NodePool default")
	}
	after, _ := np.Spec.Disruption.ConsolidateAfter.Get()
	d.tl.printf("NodePool default (%s, consolidateAfter %s) and EC2NodeClass default (al2023@latest) loaded from the seeds",
		np.Spec.Disruption.ConsolidationPolicy, after)
	return nil
}
