package store_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/nodewright/nodewright/internal/localcloud/dynalite"
	"github.com/nodewright/nodewright/internal/store"
)

// One dynalite per test binary; a fresh table per test.
var (
	dynaliteEndpoint string
	tableSeq         atomic.Int64
)

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	srv, err := dynalite.Start(ctx, dynalite.Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "store tests: start dynalite:", err)
		os.Exit(1)
	}
	dynaliteEndpoint = srv.Endpoint()
	code := m.Run()
	srv.Close()
	os.Exit(code)
}

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
	if testing.Short() {
		t.Skip("integration test: needs dynalite (skipped in -short)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	db := store.NewDynamoDBClient(aws.Config{
		Region:      "us-east-1",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(dynaliteEndpoint) })
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
