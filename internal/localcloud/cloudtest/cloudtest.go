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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nodewright/nodewright/internal/apis"
	"github.com/nodewright/nodewright/internal/apis/apistest"
	"github.com/nodewright/nodewright/internal/localcloud"
	"github.com/nodewright/nodewright/internal/localcloud/awssim"
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

// Clock is a controller clock for tests: real time plus an offset the test
// advances (expiry, TTLs, consolidateAfter) without waiting.
type Clock struct{ off atomic.Int64 }

func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

func (c *Clock) Advance(d time.Duration) { c.off.Add(int64(d)) }

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

// RouteInterruptionEvents puts the CDK stack's five EventBridge rules on
// the simulator's bus (spot interruption warning, rebalance recommendation,
// instance state change, capacity reservation interruption warning, AWS
// Health; named prefix-SpotInterruptionRule,
// ...), each targeting the SQS queue named queue.
func RouteInterruptionEvents(t testing.TB, sim *awssim.Server, prefix, queue string) {
	t.Helper()
	if err := localcloud.RouteInterruptionEvents(sim, prefix+"-", sim.SQS().QueueARN(queue)); err != nil {
		t.Fatal(err)
	}
}

// Tags reports whether the simulator's call c tags what it creates with
// value (a TagSpecification parameter), e.g. CreateFleet calls for a
// NodePool.
func Tags(c awssim.Call, value string) bool {
	for k, v := range c.Params {
		if strings.HasPrefix(k, "TagSpecification.") && v == value {
			return true
		}
	}
	return false
}
