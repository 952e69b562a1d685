// Package cloudtest holds the fixtures the controllers' integration tests
// share on a local cloud (internal/localcloud): the process environment
// pointing the SDKs at it, a fresh DynamoDB table per test, SQS queues, a
// NodePool/EC2NodeClass document loaded as apis.Config, and a log buffer
// safe for concurrent handlers.
//
// It is an ordinary package so several test packages can import it, but
// only _test files may: production code never depends on it.
package cloudtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdkaws "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
	"github.com/nodewright/nodewright/internal/localcloud/awssim/eventsim"
	"github.com/nodewright/nodewright/internal/store"
)

// SetEnv points the unmodified AWS SDK and client-go at cloud for the rest
// of t. The developer's own AWS config and credentials files and profile
// are hidden, so a test can never reach a real account through them; so is
// a machine's AWS_CA_BUNDLE (the local cloud speaks plain HTTP, and a CA
// bundle makes the SDK refuse a custom HTTP client such as Crasher's).
func SetEnv(t testing.TB, cloud *localcloud.Cloud) {
	t.Helper()
	none := filepath.Join(t.TempDir(), "none")
	for _, kv := range append(cloud.Env(), "AWS_CONFIG_FILE="+none, "AWS_SHARED_CREDENTIALS_FILE="+none, "AWS_PROFILE=", "AWS_SESSION_TOKEN=", "AWS_CA_BUNDLE=") {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
}

// NewTable creates table with the store's schema through db, waits until
// it is active and returns a Store on it.
func NewTable(ctx context.Context, t testing.TB, db *dynamodb.Client, table string, opts ...store.Option) *store.Store {
	t.Helper()
	if _, err := db.CreateTable(ctx, store.Schema.CreateTableInput(table)); err != nil {
		t.Fatalf("create table: %v", err)
	}
	// The waiter's default first delay is 20 s; dynalite is ready in milliseconds.
	if err := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: sdkaws.String(table)}, time.Minute); err != nil {
		t.Fatalf("wait for table: %v", err)
	}
	s, err := store.New(db, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Owner is the owner value (settings.Owner, aws.Options.Owner) of a
// stack whose NodeClaim table is table: the table's ARN, as the CDK app sets
// it. Each test's own table makes each test its own stack, so one test's
// garbage collection never sees another's instances.
func Owner(cloud *localcloud.Cloud, table string) string {
	return cloud.TableARN(table)
}

// CreateQueue creates the SQS queue name with attrs (nil for the
// defaults) and returns its URL.
func CreateQueue(ctx context.Context, t testing.TB, c *sqs.Client, name string, attrs map[string]string) string {
	t.Helper()
	out, err := c.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: sdkaws.String(name), Attributes: attrs})
	if err != nil {
		t.Fatalf("create queue %s: %v", name, err)
	}
	return sdkaws.ToString(out.QueueUrl)
}

// LoadConfig loads doc (NodePools and EC2NodeClasses in YAML) the way the
// functions load their configuration directory.
func LoadConfig(t testing.TB, doc string) *apis.Config {
	t.Helper()
	_, cfg := loadConfig(t, doc)
	return cfg
}

// loadConfig writes doc to a configuration directory of its own and loads
// it; it returns the directory too, for functions given only its path.
func loadConfig(t testing.TB, doc string) (string, *apis.Config) {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pool.yaml"), []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := apis.Load(dir)
	if err != nil {
		t.Fatalf("load config: %v\n%s", err, doc)
	}
	return dir, cfg
}

// DNSName turns a test name into a DNS label of at most max characters
// (keeping the end, where subtests differ), for NodePool and queue names.
func DNSName(s string, max int) string {
	s = strings.ToLower(s)
	var b strings.Builder
	for _, r := range s {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteRune('-')
		}
	}
	out := strings.Trim(b.String(), "-")
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return strings.Trim(out, "-")
}

// SyncBuffer collects the logs of handlers running concurrently, to print
// when a test fails.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Len is how many bytes were logged so far.
func (s *SyncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

// Bytes is a copy of what was logged so far.
func (s *SyncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// Eventually polls f every 100 ms until it reports done, and fails t with
// f's last message if that takes longer than d.
func Eventually(t testing.TB, what string, d time.Duration, f func() (done bool, msg string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := f()
		if ok {
			return
		}
		last = msg
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %s", what, last)
}

// WatchTaint starts watching node now; wait reports when the API server
// first showed the node with a taint of key, or zero if it did not within
// the given time after wait was called.
func WatchTaint(ctx context.Context, t testing.TB, cs kubernetes.Interface, node, key string, within time.Duration) (wait func() time.Time) {
	t.Helper()
	w, err := cs.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + node})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			n, ok := ev.Object.(*corev1.Node)
			if ok && slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool { return tn.Key == key }) {
				done <- time.Now()
				return
			}
		}
		done <- time.Time{}
	}()
	return func() time.Time {
		select {
		case at := <-done:
			return at
		case <-time.After(within):
			w.Stop()
			return time.Time{}
		}
	}
}

// Clock is a controller clock for tests: real time plus an offset the test
// advances (expiry, TTLs, consolidateAfter) without waiting.
type Clock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.off)
}

func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.off += d
	c.mu.Unlock()
}

// NodeClassYAML is an EC2NodeClass document named name for the local
// cloud's cluster: AL2023, the cluster's node role, and the subnets and
// security groups the simulator tags for discovery. Tests append it to their
// NodePools ("---" included).
func NodeClassYAML(name, cluster string) string {
	return "---\n" + nodeClass(name, cluster).YAML()
}

func nodeClass(name, cluster string) apistest.NodeClass {
	return apistest.NodeClass{Name: name, Role: "KarpenterNodeRole-" + cluster, Discovery: cluster}
}

// RouteInterruptionEvents puts the CDK stack's four EventBridge rules on the
// simulator's bus (spot interruption warning, rebalance recommendation,
// instance state change, AWS Health; named prefix-Spot, ...), each
// targeting the SQS queue named queue.
func RouteInterruptionEvents(t testing.TB, sim *awssim.Server, prefix, queue string) {
	t.Helper()
	bus := sim.Events()
	for _, r := range []struct{ name, source, detailType string }{
		{"Spot", "aws.ec2", "EC2 Spot Instance Interruption Warning"},
		{"Rebalance", "aws.ec2", "EC2 Instance Rebalance Recommendation"},
		{"StateChange", "aws.ec2", "EC2 Instance State-change Notification"},
		{"Health", "aws.health", "AWS Health Event"},
	} {
		pattern, _ := json.Marshal(map[string]any{"source": []string{r.source}, "detail-type": []string{r.detailType}})
		name := prefix + "-" + r.name
		if _, err := bus.PutRule(name, string(pattern)); err != nil {
			t.Fatal(err)
		}
		if err := bus.PutTargets(name, eventsim.Target{Id: "interruption", Arn: sim.SQS().QueueARN(queue)}); err != nil {
			t.Fatal(err)
		}
	}
}

// Deploy registers the test's stack (its table, queues, secret) with the
// local cloud and returns its function roles: controllers built with
// stack.Controller make every AWS call under the synthesized controller
// policy, as in AWS.
func Deploy(t testing.TB, cloud *localcloud.Cloud, r localcloud.StackResources) *localcloud.Stack {
	t.Helper()
	st, err := cloud.Deploy(r)
	if err != nil {
		t.Fatalf("deploy the test's stack: %v", err)
	}
	return st
}

// RoleConfig is the AWS SDK configuration of a function signing as a role
// of a deployed stack (e.g. stack.Controller).
func RoleConfig(ctx context.Context, t testing.TB, creds sdkaws.CredentialsProvider, optFns ...func(*config.LoadOptions) error) sdkaws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(ctx, append([]func(*config.LoadOptions) error{config.WithCredentialsProvider(creds)}, optFns...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
