package store_test

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/nodewright/nodewright/internal/localcloud/dynalite"
	"github.com/nodewright/nodewright/internal/store"
)

// One dynalite per test binary; a fresh table per test.
var (
	dynaliteEndpoint string
	tableSeq         atomic.Int64
)

func TestMain(m *testing.M) { dynalite.Main(m, &dynaliteEndpoint) }

// countingAPI counts Query calls (pages) so pagination tests can prove more
// than one page was read.
type countingAPI struct {
	*dynamodb.Client
	queries atomic.Int64
}

func (c *countingAPI) Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.queries.Add(1)
	return c.Client.Query(ctx, in, optFns...)
}

// fakeClock is a settable clock shared by every Store of a test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type env struct {
	ctx   context.Context
	db    *dynamodb.Client
	api   *countingAPI
	table string
	clock *fakeClock
}

func (e *env) store(t testing.TB, opts ...store.Option) *store.Store {
	t.Helper()
	s, err := store.New(e.api, e.table, append([]store.Option{store.WithClock(e.clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var nonName = regexp.MustCompile(`[^a-zA-Z0-9_.-]+`)

func newEnv(t *testing.T) *env { return newBenchEnv(t) }

func newBenchEnv(t testing.TB) *env {
	t.Helper()
	db := dynalite.Client(t, dynaliteEndpoint)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	name := fmt.Sprintf("%s-%d", nonName.ReplaceAllString(t.Name(), "-"), tableSeq.Add(1))
	if len(name) > 200 {
		name = name[:200]
	}
	if _, err := db.CreateTable(ctx, store.Schema.CreateTableInput(name)); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	if err := dynamodb.NewTableExistsWaiter(db, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 200*time.Millisecond
	}).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, time.Minute); err != nil {
		t.Fatalf("wait for table %s: %v", name, err)
	}
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return &env{ctx: ctx, db: db, api: &countingAPI{Client: db}, table: name,
		clock: &fakeClock{t: time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC)}}
}
