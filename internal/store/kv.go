package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// KV is a small versioned value for checkpoints (e.g. a disruption pass's
// progress, a webhook nudge's coalescing window). Items: pk "kv", sk = key.
type KV struct {
	Key     string
	Value   []byte
	Version int64
	// ExpiresAt is zero for values that never expire.
	ExpiresAt time.Time
}

// GetKV reads a value. Missing or expired: ErrNotFound.
func (s *Store) GetKV(ctx context.Context, k string) (*KV, error) {
	item, err := s.getItem(ctx, pkKV, k)
	if err != nil {
		return nil, fmt.Errorf("get kv %s: %w", k, err)
	}
	if item == nil {
		return nil, fmt.Errorf("get kv %s: %w", k, ErrNotFound)
	}
	out, err := s.decodeKV(k, item)
	if err != nil {
		return nil, fmt.Errorf("get kv %s: %w", k, err)
	}
	return out, nil
}

// ListKV returns the unexpired values whose keys start with prefix, in
// key order, with one Query on the kv partition.
func (s *Store) ListKV(ctx context.Context, prefix string) ([]*KV, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND begins_with(#sk, :prefix)"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": sAttr(pkKV), ":prefix": sAttr(prefix),
		},
	}
	out, err := queryDecoded(ctx, s, in, func(item map[string]types.AttributeValue) (*KV, error) {
		sk, _ := item[AttrSK].(*types.AttributeValueMemberS)
		if sk == nil {
			return nil, ErrNotFound
		}
		return s.decodeKV(sk.Value, item)
	})
	if err != nil {
		return nil, fmt.Errorf("list kv %q: %w", prefix, err)
	}
	return out, nil
}

// queryDecoded runs a paginated query and decodes every item, skipping
// those decode reports ErrNotFound for (expired, or not of the kind).
func queryDecoded[T any](ctx context.Context, s *Store, in *dynamodb.QueryInput, decode func(map[string]types.AttributeValue) (T, error)) ([]T, error) {
	var out []T
	err := s.queryAll(ctx, in, func(items []map[string]types.AttributeValue) error {
		for _, item := range items {
			v, err := decode(item)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			out = append(out, v)
		}
		return nil
	})
	return out, err
}

// decodeKV reads a kv item; an expired one (DynamoDB deletes them lazily)
// is ErrNotFound.
func (s *Store) decodeKV(k string, item map[string]types.AttributeValue) (*KV, error) {
	v, err := numAttr(item, "version")
	if err != nil {
		return nil, err
	}
	out := &KV{Key: k, Version: v}
	if exp, err := numAttr(item, AttrExpiresAt); err == nil {
		if s.expired(exp) {
			return nil, fmt.Errorf("%w (expired)", ErrNotFound)
		}
		out.ExpiresAt = time.Unix(exp, 0)
	}
	if b, ok := item["value"].(*types.AttributeValueMemberB); ok {
		out.Value = b.Value
	}
	return out, nil
}

// PutKV writes value if the stored version equals expectedVersion (0: the key
// must be absent or expired) and returns the new version. ttl > 0 makes the
// value expire. A concurrent write gives ErrConflict.
func (s *Store) PutKV(ctx context.Context, k string, value []byte, expectedVersion int64, ttl time.Duration) (int64, error) {
	if k == "" {
		return 0, errors.New("put kv: empty key")
	}
	item := key(pkKV, k)
	item["version"] = nAttr(expectedVersion + 1)
	item["value"] = &types.AttributeValueMemberB{Value: value}
	if ttl > 0 {
		item[AttrExpiresAt] = nAttr(s.now().Add(ttl).Unix())
	}
	in := &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}
	if expectedVersion == 0 {
		in.ConditionExpression = aws.String("attribute_not_exists(#pk) OR #exp <= :now")
		in.ExpressionAttributeNames = map[string]string{"#pk": AttrPK, "#exp": AttrExpiresAt}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":now": nAttr(s.now().Unix())}
	} else {
		in.ConditionExpression = aws.String("#v = :v AND (attribute_not_exists(#exp) OR #exp > :now)")
		in.ExpressionAttributeNames = map[string]string{"#v": "version", "#exp": AttrExpiresAt}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{":v": nAttr(expectedVersion), ":now": nAttr(s.now().Unix())}
	}
	_, err := s.api.PutItem(ctx, in)
	if isConditionFailed(err) {
		return 0, fmt.Errorf("put kv %s (expected version %d): %w", k, expectedVersion, ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("put kv %s: %w", k, err)
	}
	return expectedVersion + 1, nil
}

// DeleteKV removes a value if its version still equals expectedVersion.
func (s *Store) DeleteKV(ctx context.Context, k string, expectedVersion int64) error {
	_, err := s.api.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName: aws.String(s.table), Key: key(pkKV, k),
		ConditionExpression:       aws.String("#v = :v"),
		ExpressionAttributeNames:  map[string]string{"#v": "version"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":v": nAttr(expectedVersion)},
	})
	if isConditionFailed(err) {
		return fmt.Errorf("delete kv %s (expected version %d): %w", k, expectedVersion, ErrConflict)
	}
	if err != nil {
		return fmt.Errorf("delete kv %s: %w", k, err)
	}
	return nil
}
