package store

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Sentinel errors; every error the store returns wraps one of these or the
// SDK's own error, so callers branch with errors.Is.
var (
	// ErrNotFound: no live item (absent, tombstoned, or expired).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the item changed since it was read (optimistic concurrency).
	ErrConflict = errors.New("version conflict")
	// ErrAlreadyExists: a create-if-absent found a live item of that name.
	ErrAlreadyExists = errors.New("already exists")
	// ErrLeaseHeld: another holder owns an unexpired lease.
	ErrLeaseHeld = errors.New("lease held by another holder")
	// ErrLeaseLost: the lease was taken over (or released) since it was acquired.
	ErrLeaseLost = errors.New("lease lost")
)

// API is the subset of the DynamoDB client the store uses; *dynamodb.Client
// satisfies it.
type API interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
}

// Store is the repository over one DynamoDB table laid out as Schema.
// It is safe for concurrent use.
type Store struct {
	api          API
	table        string
	now          func() time.Time
	tombstoneTTL time.Duration
	pageSize     int32
	// undecodable is told of every claim record a listing skipped.
	undecodable func(ctx context.Context, u Undecodable)
	// decodes are the claims the last full listing decoded.
	decodes claimDecodes
}

// Option configures a Store.
type Option func(*Store)

// WithClock replaces time.Now (tests drive expiry with it). Leases, ICE
// entries and tombstones all compare against this clock, so every function
// sharing a table must have roughly synchronised clocks (Lambda's are).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithTombstoneTTL sets how long a deleted NodeClaim stays readable as a
// tombstone (default 7 days).
func WithTombstoneTTL(d time.Duration) Option { return func(s *Store) { s.tombstoneTTL = d } }

// WithUndecodable calls report for every claim record a listing skips
// because it cannot be decoded (the app logs it with its key and counts it
// in metrics.NodeClaimsUndecodable). One bad record, say after a rollback to
// a version that cannot read a newer one, must not stop every listing.
func WithUndecodable(report func(ctx context.Context, u Undecodable)) Option {
	return func(s *Store) { s.undecodable = report }
}

// WithPageSize caps items per Query page (default: DynamoDB's 1 MB pages).
func WithPageSize(n int32) Option { return func(s *Store) { s.pageSize = n } }

// New returns a Store over table. Use NewDynamoDBClient for a client with
// throttling-friendly retries.
func New(api API, table string, opts ...Option) (*Store, error) {
	if api == nil {
		return nil, errors.New("store: nil DynamoDB client")
	}
	if table == "" {
		return nil, errors.New("store: empty table name")
	}
	s := &Store{api: api, table: table, now: time.Now, tombstoneTTL: 7 * 24 * time.Hour}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

// Table returns the table name.
func (s *Store) Table() string { return s.table }

// NewDynamoDBClient builds a DynamoDB client whose retryer suits a shared
// on-demand table: throttling (ProvisionedThroughputExceeded, Throttling,
// RequestLimitExceeded) and 5xx are retried up to 10 attempts with jittered
// exponential backoff capped at 2 s. The client-side retry quota is disabled:
// under a throttling burst it would otherwise turn throttles into hard
// "retry quota exceeded" failures across every concurrent caller.
// Backoff starts at 25 ms (DynamoDB throttling clears in milliseconds to
// seconds; the SDK's default 1 s base would stall a Lambda pass needlessly).
func NewDynamoDBClient(cfg aws.Config, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.Retryer = NewRetryer()
	}}, optFns...)
	return dynamodb.NewFromConfig(cfg, opts...)
}

// NewRetryer is the retryer NewDynamoDBClient installs.
func NewRetryer() aws.Retryer {
	return retry.NewStandard(func(o *retry.StandardOptions) {
		o.MaxAttempts = 10
		o.MaxBackoff = 2 * time.Second
		o.Backoff = jitterBackoff{base: 25 * time.Millisecond, max: 2 * time.Second}
		o.RateLimiter = ratelimit.None
	})
}

// jitterBackoff is full-jitter exponential backoff: a uniform delay in
// [0, min(max, base*2^attempt)).
type jitterBackoff struct{ base, max time.Duration }

func (b jitterBackoff) BackoffDelay(attempt int, _ error) (time.Duration, error) {
	ceil := b.max
	if attempt < 20 && b.base<<attempt < b.max {
		ceil = b.base << attempt
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1)), nil
}

// Item kinds and key prefixes. Every kind lives in its own partition(s) so a
// Query never mixes kinds.
const (
	pkNodeClaim   = "nodeclaim"
	pkLease       = "lease"
	pkICE         = "ice"
	pkAllocatable = "allocatable"
	pkKV          = "kv"
	pkCachePrefix = "cache#"
)

func isConditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func key(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: pk},
		AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

// queryAll runs a Query to exhaustion, calling fn for every page's items.
func (s *Store) queryAll(ctx context.Context, in *dynamodb.QueryInput, fn func([]map[string]types.AttributeValue) error) error {
	if s.pageSize > 0 && in.Limit == nil {
		in.Limit = aws.Int32(s.pageSize)
	}
	p := dynamodb.NewQueryPaginator(s.api, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		if err := fn(out.Items); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) queryPartition(ctx context.Context, pk string, consistent bool, fn func([]map[string]types.AttributeValue) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}},
		ConsistentRead:            aws.Bool(consistent),
	}
	if err := s.queryAll(ctx, in, fn); err != nil {
		return fmt.Errorf("query %s partition %q: %w", s.table, pk, err)
	}
	return nil
}

func nAttr(v int64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: fmt.Sprint(v)}
}

func sAttr(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }
