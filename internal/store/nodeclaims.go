package store

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodewright/nodewright/internal/apis"
)

// NodeClaim items: pk "nodeclaim#<shard>", sk = name. The shard (a hash of
// the name, claimShards of them) spreads a launch burst's writes over several
// partitions, and listing every claim is claimShards Queries run in parallel.
// The whole claim is kept as gzipped JSON in "body" (DynamoDB bills writes per
// KB, and a claim's requirements list dozens of instance types); the
// attributes beside it exist only for conditions and indexes.
//
// The version lives in the "version" attribute and is surfaced to callers as
// metadata.resourceVersion, as a Kubernetes client would expect.
type claimItem struct {
	PK        string `dynamodbav:"pk"`
	SK        string `dynamodbav:"sk"`
	GSI1PK    string `dynamodbav:"gsi1pk,omitempty"`
	GSI1SK    string `dynamodbav:"gsi1sk,omitempty"`
	GSI2PK    string `dynamodbav:"gsi2pk,omitempty"`
	GSI2SK    string `dynamodbav:"gsi2sk,omitempty"`
	Version   int64  `dynamodbav:"version"`
	Deleted   bool   `dynamodbav:"deleted"`
	DeletedAt int64  `dynamodbav:"deletedAt,omitempty"`
	ExpiresAt int64  `dynamodbav:"expiresAt,omitempty"`
	Body      []byte `dynamodbav:"body"`
}

const claimShards = 8

func claimPK(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	return fmt.Sprintf("%s#%d", pkNodeClaim, h.Sum32()%claimShards)
}

// Tombstone is a deleted NodeClaim kept for auditing until ExpiresAt.
type Tombstone struct {
	Claim     *apis.NodeClaim
	DeletedAt time.Time
	ExpiresAt time.Time
}

func instanceKey(id string) string { return "instance#" + id }
func nodePoolKey(np string) string { return "nodepool#" + np }
func claimSortKey(n string) string { return "nodeclaim#" + n }
func versionOf(nc *apis.NodeClaim) (int64, error) {
	if nc.ResourceVersion == "" {
		return 0, fmt.Errorf("nodeclaim %s has no resourceVersion (read it from the store first)", nc.Name)
	}
	v, err := strconv.ParseInt(nc.ResourceVersion, 10, 64)
	if err != nil || v < 1 {
		return 0, fmt.Errorf("nodeclaim %s: invalid resourceVersion %q", nc.Name, nc.ResourceVersion)
	}
	return v, nil
}

func (s *Store) claimToItem(nc *apis.NodeClaim, version int64) (map[string]types.AttributeValue, error) {
	body, err := ClaimBody(nc, version)
	if err != nil {
		return nil, err
	}
	zbody, err := gzipBytes(body)
	if err != nil {
		return nil, fmt.Errorf("encode nodeclaim %s: %w", nc.Name, err)
	}
	it := claimItem{PK: claimPK(nc.Name), SK: nc.Name, Version: version, Body: zbody}
	if id := nc.Status.InstanceID; id != "" {
		it.GSI1PK, it.GSI1SK = instanceKey(id), claimSortKey(nc.Name)
	}
	if np := nc.NodePoolName(); np != "" {
		it.GSI2PK, it.GSI2SK = nodePoolKey(np), claimSortKey(nc.Name)
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode nodeclaim %s: %w", nc.Name, err)
	}
	return av, nil
}

func decodeClaim(av map[string]types.AttributeValue) (*apis.NodeClaim, claimItem, error) {
	it, err := claimItemOf(av)
	if err != nil {
		return nil, it, err
	}
	nc, err := decodeClaimBody(it)
	return nc, it, err
}

// claimItemOf decodes a claim's item, leaving its body compressed.
func claimItemOf(av map[string]types.AttributeValue) (claimItem, error) {
	var it claimItem
	if err := attributevalue.UnmarshalMap(av, &it); err != nil {
		return it, fmt.Errorf("decode nodeclaim item: %w", err)
	}
	return it, nil
}

// decodeClaimBody decodes an item's compressed body.
func decodeClaimBody(it claimItem) (*apis.NodeClaim, error) {
	body, err := gunzipBytes(it.Body)
	if err != nil {
		return nil, fmt.Errorf("decode nodeclaim %s body: %w", it.SK, err)
	}
	nc := &apis.NodeClaim{}
	if err := json.Unmarshal(body, nc); err != nil {
		return nil, fmt.Errorf("decode nodeclaim %s body: %w", it.SK, err)
	}
	nc.ResourceVersion = strconv.FormatInt(it.Version, 10)
	return nc, nil
}

// CreateNodeClaim writes a new claim if no live claim of that name exists
// (create-if-absent): deterministic names make launches idempotent, so a
// retried provisioner run gets ErrAlreadyExists instead of a second claim.
// An expired tombstone of the same name is overwritten. On success
// nc.ResourceVersion is "1" and CreationTimestamp is set if it was zero.
func (s *Store) CreateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	if nc.CreationTimestamp.IsZero() {
		nc.CreationTimestamp = metav1.NewTime(s.now().UTC().Truncate(time.Second))
	}
	item, err := s.claimToItem(nc, 1)
	if err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#pk) OR (#del = :true AND #exp < :now)"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#del": "deleted", "#exp": AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":true": &types.AttributeValueMemberBOOL{Value: true},
			":now":  nAttr(s.now().Unix()),
		},
	})
	if isConditionFailed(err) {
		return fmt.Errorf("create nodeclaim %s: %w", nc.Name, ErrAlreadyExists)
	}
	if err != nil {
		return fmt.Errorf("create nodeclaim %s: %w", nc.Name, err)
	}
	nc.ResourceVersion = "1"
	return nil
}

// GetNodeClaim reads a live claim (strongly consistent). Tombstones and
// missing claims give ErrNotFound.
func (s *Store) GetNodeClaim(ctx context.Context, name string) (*apis.NodeClaim, error) {
	nc, it, err := s.getClaimItem(ctx, name)
	if err != nil {
		return nil, err
	}
	if it.Deleted {
		return nil, fmt.Errorf("get nodeclaim %s: %w (deleted)", name, ErrNotFound)
	}
	return nc, nil
}

// GetTombstone reads a deleted claim that has not expired yet.
func (s *Store) GetTombstone(ctx context.Context, name string) (*Tombstone, error) {
	nc, it, err := s.getClaimItem(ctx, name)
	if err != nil {
		return nil, err
	}
	if !it.Deleted {
		return nil, fmt.Errorf("get tombstone %s: %w (claim is live)", name, ErrNotFound)
	}
	return &Tombstone{Claim: nc, DeletedAt: time.Unix(it.DeletedAt, 0), ExpiresAt: time.Unix(it.ExpiresAt, 0)}, nil
}

func (s *Store) getClaimItem(ctx context.Context, name string) (*apis.NodeClaim, claimItem, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: key(claimPK(name), name), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, claimItem{}, fmt.Errorf("get nodeclaim %s: %w", name, err)
	}
	if out.Item == nil {
		return nil, claimItem{}, fmt.Errorf("get nodeclaim %s: %w", name, ErrNotFound)
	}
	nc, it, err := decodeClaim(out.Item)
	if err != nil {
		return nil, it, err
	}
	if s.expired(it.ExpiresAt) {
		return nil, it, fmt.Errorf("get nodeclaim %s: %w (expired)", name, ErrNotFound)
	}
	return nc, it, nil
}

func (s *Store) expired(expiresAt int64) bool {
	return expiresAt != 0 && expiresAt <= s.now().Unix()
}

// UpdateNodeClaim replaces a live claim if its stored version still equals
// nc.ResourceVersion; on success nc.ResourceVersion is the new version.
// A concurrent change gives ErrConflict; a deleted or missing claim
// ErrNotFound.
func (s *Store) UpdateNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	v, item, err := s.nextClaimItem("update", nc)
	if err != nil {
		return err
	}
	return s.putClaimIfCurrent(ctx, "update", nc, v, item)
}

// nextClaimItem returns the version nc was read at and the item of its next
// version; op names the operation in errors.
func (s *Store) nextClaimItem(op string, nc *apis.NodeClaim) (int64, map[string]types.AttributeValue, error) {
	v, err := versionOf(nc)
	if err != nil {
		return 0, nil, fmt.Errorf("%s nodeclaim: %w", op, err)
	}
	item, err := s.claimToItem(nc, v+1)
	if err != nil {
		return 0, nil, err
	}
	return v, item, nil
}

// putClaimIfCurrent writes item (version v+1 of nc) only while the stored
// claim is live at version v, and moves nc to v+1 on success.
func (s *Store) putClaimIfCurrent(ctx context.Context, op string, nc *apis.NodeClaim, v int64, item map[string]types.AttributeValue) error {
	_, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      item,
		ConditionExpression:       aws.String("#v = :v AND #del = :false"),
		ExpressionAttributeNames:  map[string]string{"#v": "version", "#del": "deleted"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": nAttr(v), ":false": &types.AttributeValueMemberBOOL{Value: false}},
	})
	if isConditionFailed(err) {
		return s.classifyClaimConflict(ctx, op, nc.Name, v)
	}
	if err != nil {
		return fmt.Errorf("%s nodeclaim %s: %w", op, nc.Name, err)
	}
	nc.ResourceVersion = strconv.FormatInt(v+1, 10)
	return nil
}

// classifyClaimConflict turns a failed condition into ErrNotFound (gone or
// tombstoned) or ErrConflict (someone else wrote first). One extra read, on
// the failure path only.
func (s *Store) classifyClaimConflict(ctx context.Context, op, name string, want int64) error {
	_, it, err := s.getClaimItem(ctx, name)
	if errors.Is(err, ErrNotFound) || (err == nil && it.Deleted) {
		return fmt.Errorf("%s nodeclaim %s: %w", op, name, ErrNotFound)
	}
	if err != nil {
		// Only ErrConflict is wrapped: the failed re-read is detail.
		return fmt.Errorf("%s nodeclaim %s: %w (and re-read failed: %s)", op, name, ErrConflict, err.Error())
	}
	return fmt.Errorf("%s nodeclaim %s: %w (have version %d, stored %d)", op, name, ErrConflict, want, it.Version)
}

// MutateNodeClaim applies fn to the latest version of a claim and writes it,
// re-reading and re-applying on ErrConflict (up to 8 attempts). fn must be
// free of side effects other than on the claim, since it may run repeatedly;
// returning an error from fn aborts without writing.
func (s *Store) MutateNodeClaim(ctx context.Context, name string, fn func(*apis.NodeClaim) error) (*apis.NodeClaim, error) {
	return MutateWith(ctx, name, fn, s.GetNodeClaim, s.UpdateNodeClaim)
}

// DeleteNodeClaim turns a live claim into a tombstone if its version still
// equals nc.ResourceVersion. The tombstone keeps the claim as given (its
// final state) and the index attributes, and carries the TTL attribute so
// DynamoDB removes it after the tombstone TTL. Deleting an already deleted
// or missing claim gives ErrNotFound, so callers can treat it as done.
func (s *Store) DeleteNodeClaim(ctx context.Context, nc *apis.NodeClaim) error {
	v, item, err := s.nextClaimItem("delete", nc)
	if err != nil {
		return err
	}
	now := s.now()
	item["deleted"] = &types.AttributeValueMemberBOOL{Value: true}
	item["deletedAt"] = nAttr(now.Unix())
	item[AttrExpiresAt] = nAttr(now.Add(s.tombstoneTTL).Unix())
	return s.putClaimIfCurrent(ctx, "delete", nc, v, item)
}

// ListNodeClaims returns every live claim, sorted by name (strongly
// consistent, paginated).
func (s *Store) ListNodeClaims(ctx context.Context) ([]*apis.NodeClaim, error) {
	live, _, _, err := s.listClaims(ctx)
	return live, err
}

// ListNodeClaimsReport is ListNodeClaims that also returns the records it
// skipped as undecodable: a caller that acts on the absence of a claim
// (garbage collection) must treat those as unknown, never as absent.
func (s *Store) ListNodeClaimsReport(ctx context.Context) ([]*apis.NodeClaim, []Undecodable, error) {
	live, _, skipped, err := s.listClaims(ctx)
	return live, skipped, err
}

// ListTombstones returns every unexpired tombstone, sorted by name.
func (s *Store) ListTombstones(ctx context.Context) ([]Tombstone, error) {
	_, dead, _, err := s.listClaims(ctx)
	return dead, err
}

// Undecodable is a claim record a listing skipped.
type Undecodable struct {
	// Key is the record's partition and sort key ("pk/sk").
	Key string
	// Name is the claim's name: the record's sort key ("" if that is
	// unreadable too).
	Name string
	Err  error
}

func undecodable(av map[string]types.AttributeValue, err error) Undecodable {
	str := func(k string) string {
		if v, ok := av[k].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	pk, sk := str(AttrPK), str(AttrSK)
	return Undecodable{Key: pk + "/" + sk, Name: sk, Err: err}
}

func (s *Store) reportUndecodable(ctx context.Context, u Undecodable) {
	if s.undecodable != nil {
		s.undecodable(ctx, u)
	}
}

func (s *Store) listClaims(ctx context.Context) ([]*apis.NodeClaim, []Tombstone, []Undecodable, error) {
	var mu sync.Mutex
	var live []*apis.NodeClaim
	var dead []Tombstone
	var skipped []Undecodable
	decoded := map[string]decodedClaim{}
	g, gctx := errgroup.WithContext(ctx)
	for shard := range claimShards {
		g.Go(func() error {
			return s.queryPartition(gctx, fmt.Sprintf("%s#%d", pkNodeClaim, shard), true, func(items []map[string]types.AttributeValue) error {
				for _, av := range items {
					nc, it, d, err := s.decodes.decode(av)
					mu.Lock()
					if err == nil {
						decoded[it.SK] = d
					}
					switch {
					case err != nil:
						skipped = append(skipped, undecodable(av, err))
					case s.expired(it.ExpiresAt):
					case it.Deleted:
						dead = append(dead, Tombstone{Claim: nc, DeletedAt: time.Unix(it.DeletedAt, 0), ExpiresAt: time.Unix(it.ExpiresAt, 0)})
					default:
						live = append(live, nc)
					}
					mu.Unlock()
				}
				return nil
			})
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, nil, fmt.Errorf("list nodeclaims: %w", err)
	}
	s.decodes.last.Store(&decoded)
	sort.Slice(live, func(i, j int) bool { return live[i].Name < live[j].Name })
	sort.Slice(dead, func(i, j int) bool { return dead[i].Claim.Name < dead[j].Claim.Name })
	sort.Slice(skipped, func(i, j int) bool { return skipped[i].Key < skipped[j].Key })
	for _, u := range skipped {
		s.reportUndecodable(ctx, u)
	}
	return live, dead, skipped, nil
}

// ListNodeClaimsByNodePool returns the live claims of one NodePool through
// the by-nodepool index (eventually consistent, like every GSI read).
func (s *Store) ListNodeClaimsByNodePool(ctx context.Context, nodePool string) ([]*apis.NodeClaim, error) {
	out, err := s.queryClaimIndex(ctx, IndexByNodePool, AttrGSI2PK, nodePoolKey(nodePool))
	if err != nil {
		return nil, fmt.Errorf("list nodeclaims of nodepool %s: %w", nodePool, err)
	}
	return out, nil
}

// GetNodeClaimByInstanceID finds the live claim of an EC2 instance through the
// by-instance index (eventually consistent: a claim whose instance ID was
// just written may not be visible for a moment).
func (s *Store) GetNodeClaimByInstanceID(ctx context.Context, instanceID string) (*apis.NodeClaim, error) {
	out, err := s.queryClaimIndex(ctx, IndexByInstance, AttrGSI1PK, instanceKey(instanceID))
	if err != nil {
		return nil, fmt.Errorf("get nodeclaim by instance %s: %w", instanceID, err)
	}
	return OneClaimOfInstance(instanceID, out)
}

func (s *Store) queryClaimIndex(ctx context.Context, index, attr, value string) ([]*apis.NodeClaim, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		IndexName:                 aws.String(index),
		KeyConditionExpression:    aws.String("#k = :k"),
		FilterExpression:          aws.String("#del = :false"),
		ExpressionAttributeNames:  map[string]string{"#k": attr, "#del": "deleted"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": sAttr(value), ":false": &types.AttributeValueMemberBOOL{Value: false}},
	}
	var out []*apis.NodeClaim
	err := s.queryAll(ctx, in, func(items []map[string]types.AttributeValue) error {
		for _, av := range items {
			nc, it, err := decodeClaim(av)
			if err != nil {
				// Skipped like in ListNodeClaims: one bad record must not
				// hide every other claim of the pool.
				s.reportUndecodable(ctx, undecodable(av, err))
				continue
			}
			if it.Deleted || s.expired(it.ExpiresAt) {
				continue
			}
			out = append(out, nc)
		}
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzipWriters.Get().(*gzip.Writer)
	defer gzipWriters.Put(zw)
	zw.Reset(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Listing thousands of claims decodes thousands of bodies; reusing readers
// and writers avoids allocating their window state every time.
var (
	gzipReaders sync.Pool
	gzipWriters = sync.Pool{New: func() any { return gzip.NewWriter(nil) }}
)

func gunzipBytes(b []byte) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(b))
	} else {
		err = zr.Reset(bytes.NewReader(b))
	}
	if err != nil {
		return nil, err
	}
	defer gzipReaders.Put(zr)
	return io.ReadAll(zr)
}
