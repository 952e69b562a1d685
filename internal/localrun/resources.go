package localrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/lambdaspec"
	"github.com/nodewright/nodewright/internal/settings"
	"github.com/nodewright/nodewright/internal/store"
)

// Queues are the stack's queues: URL and ARN of each, by role.
type Queues struct {
	ProvisionURL, ProvisionARN       string
	WorkURL, WorkARN                 string
	InterruptionURL, InterruptionARN string
	DisruptionURL, DisruptionARN     string
}

// createTable creates the functions' DynamoDB table from store.Schema (the
// layout the CDK app deploys) and waits until it is ACTIVE.
func createTable(ctx context.Context, db *dynamodb.Client, table string) error {
	if _, err := db.CreateTable(ctx, store.Schema.CreateTableInput(table)); err != nil {
		return fmt.Errorf("create table %s: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay = 100 * time.Millisecond
		o.MaxDelay = time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: sdkaws.String(table)}, time.Minute); err != nil {
		return fmt.Errorf("table %s never became active: %w", table, err)
	}
	return nil
}

// queueConstructs are the stack's queues by construct ID, with the name
// suffix the local run gives each.
var queueConstructs = []struct{ construct, suffix string }{
	{"ProvisionQueue", "-provision"}, {"WorkQueue", "-work"}, {"InterruptionQueue", "-interruption"}, {"DisruptionQueue", "-disruption"},
}

// byConstruct is the URL and ARN of the queue the template calls construct.
func (qs Queues) byConstruct(construct string) (url, arn string, err error) {
	switch construct {
	case "ProvisionQueue":
		return qs.ProvisionURL, qs.ProvisionARN, nil
	case "WorkQueue":
		return qs.WorkURL, qs.WorkARN, nil
	case "InterruptionQueue":
		return qs.InterruptionURL, qs.InterruptionARN, nil
	case "DisruptionQueue":
		return qs.DisruptionURL, qs.DisruptionARN, nil
	}
	return "", "", fmt.Errorf("the local run has no queue %s", construct)
}

// set records the URL and ARN of the queue the template calls construct.
func (qs *Queues) set(construct, url, arn string) {
	switch construct {
	case "ProvisionQueue":
		qs.ProvisionURL, qs.ProvisionARN = url, arn
	case "WorkQueue":
		qs.WorkURL, qs.WorkARN = url, arn
	case "InterruptionQueue":
		qs.InterruptionURL, qs.InterruptionARN = url, arn
	case "DisruptionQueue":
		qs.DisruptionURL, qs.DisruptionARN = url, arn
	}
}

// createQueues creates the provision, work, interruption and disruption
// queues with their dead-letter queues, with the template's visibility
// timeouts, retention periods and redrive policies.
func createQueues(ctx context.Context, client *sqs.Client, spec *lambdaspec.Spec, prefix string) (Queues, error) {
	var qs Queues
	for _, c := range queueConstructs {
		q, err := spec.Queue(c.construct)
		if err != nil {
			return qs, err
		}
		url, arn, err := createQueue(ctx, client, spec, prefix+c.suffix, q)
		if err != nil {
			return qs, err
		}
		qs.set(c.construct, url, arn)
	}
	return qs, nil
}

// createQueue creates one queue of the template, after its dead-letter
// queue.
func createQueue(ctx context.Context, client *sqs.Client, spec *lambdaspec.Spec, name string, q lambdaspec.Queue) (string, string, error) {
	attrs := map[string]string{
		"VisibilityTimeout":      fmt.Sprint(int(q.VisibilityTimeout.Seconds())),
		"MessageRetentionPeriod": fmt.Sprint(int(q.Retention.Seconds())),
	}
	if q.DeadLetter != "" {
		dq, err := spec.Queue(q.DeadLetter)
		if err != nil {
			return "", "", fmt.Errorf("queue %s: %w", q.Construct, err)
		}
		_, dlqARN, err := createQueue(ctx, client, spec, name+"-dlq", dq)
		if err != nil {
			return "", "", err
		}
		redrive, _ := json.Marshal(map[string]any{"deadLetterTargetArn": dlqARN, "maxReceiveCount": q.MaxReceiveCount})
		attrs["RedrivePolicy"] = string(redrive)
	}
	out, err := client.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: sdkaws.String(name), Attributes: attrs})
	if err != nil {
		return "", "", fmt.Errorf("create queue %s: %w", name, err)
	}
	a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: out.QueueUrl,
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return "", "", fmt.Errorf("queue %s attributes: %w", name, err)
	}
	return sdkaws.ToString(out.QueueUrl), a.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], nil
}

func randomSecret() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// functionEnv is the environment the CDK stack gives every function, plus
// the local cloud's endpoints and credentials.
func functionEnv(cloud *localcloud.Cloud, table string, qs Queues, configDir, secret string, batchIdle time.Duration) map[string]string {
	env := map[string]string{}
	for _, kv := range cloud.ControllerEnv() {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	// The functions find the cluster through EKS DescribeCluster and an STS
	// token, never a kubeconfig.
	delete(env, "KUBECONFIG")
	env["AWS_EC2_METADATA_DISABLED"] = "true"
	env["AWS_CONFIG_FILE"] = os.DevNull
	env["AWS_SHARED_CREDENTIALS_FILE"] = os.DevNull
	env["AWS_PROFILE"] = ""
	env[settings.EnvClusterName] = cloud.ClusterName
	env[settings.EnvTableName] = table
	env[settings.EnvOwner] = cloud.TableARN(table)
	env[settings.EnvWorkQueueURL] = qs.WorkURL
	env[settings.EnvProvisionQueueURL] = qs.ProvisionURL
	env[settings.EnvInterruptionQueue] = qs.InterruptionURL
	env[settings.EnvDisruptionQueueURL] = qs.DisruptionURL
	env[settings.EnvWebhookSecret] = secret
	env[settings.EnvConfigDir] = configDir
	env[settings.EnvBatchIdle] = batchIdle.String()
	env[settings.EnvLogLevel] = "INFO"
	return env
}

// setEnv applies env to the process (the AWS SDK's default configuration
// reads it, as in Lambda) and returns a function restoring the previous
// values.
func setEnv(env map[string]string) func() {
	type prev struct {
		v  string
		ok bool
	}
	saved := map[string]prev{}
	for k, v := range env {
		old, ok := os.LookupEnv(k)
		saved[k] = prev{old, ok}
		_ = os.Setenv(k, v)
	}
	// KUBECONFIG is dropped on purpose (see functionEnv).
	if old, ok := os.LookupEnv("KUBECONFIG"); ok {
		saved["KUBECONFIG"] = prev{old, ok}
		_ = os.Unsetenv("KUBECONFIG")
	}
	return func() {
		for k, p := range saved {
			if p.ok {
				_ = os.Setenv(k, p.v)
			} else {
				_ = os.Unsetenv(k)
			}
		}
	}
}
