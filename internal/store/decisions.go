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

// pkDecision holds what shadow mode decided and did not act on. Items:
// decision / <at, zero-padded unix ms>#<kind>#<id>, with body (gzipped
// JSON) and expiresAt: the sort key orders them by time, so a window is one
// Query.
const pkDecision = "decision"

// DecisionTTL is how long decision records are kept (the report's longest
// useful window is a few days).
const DecisionTTL = 14 * 24 * time.Hour

// Decision is one record of a decision a function made in shadow mode.
// Body is the kind's own JSON (internal/decision defines the kinds).
type Decision struct {
	At   time.Time
	Kind string
	// ID tells apart records of one kind made in the same millisecond.
	ID   string
	Body []byte
}

func decisionSortKey(at time.Time, kind, id string) string {
	return fmt.Sprintf("%015d#%s#%s", at.UnixMilli(), kind, id)
}

// PutDecision writes d; it expires after DecisionTTL.
func (s *Store) PutDecision(ctx context.Context, d Decision) error {
	if d.Kind == "" || d.At.IsZero() {
		return errors.New("put decision: kind and time are required")
	}
	body, err := gzipBytes(d.Body)
	if err != nil {
		return fmt.Errorf("put decision: %w", err)
	}
	item := key(pkDecision, decisionSortKey(d.At, d.Kind, d.ID))
	item["kind"] = sAttr(d.Kind)
	item["body"] = &types.AttributeValueMemberB{Value: body}
	item[AttrExpiresAt] = nAttr(d.At.Add(DecisionTTL).Unix())
	if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
		return fmt.Errorf("put decision %s: %w", d.Kind, err)
	}
	return nil
}

// ListDecisions returns the unexpired records made at or after since, oldest
// first.
func (s *Store) ListDecisions(ctx context.Context, since time.Time) ([]Decision, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk >= :from"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": sAttr(pkDecision), ":from": sAttr(fmt.Sprintf("%015d", since.UnixMilli())),
		},
	}
	out, err := queryDecoded(ctx, s, in, s.decodeDecision)
	if err != nil {
		return nil, fmt.Errorf("list decisions: %w", err)
	}
	return out, nil
}

func (s *Store) decodeDecision(item map[string]types.AttributeValue) (Decision, error) {
	if exp, err := numAttr(item, AttrExpiresAt); err == nil && s.expired(exp) {
		return Decision{}, ErrNotFound
	}
	sk, _ := item[AttrSK].(*types.AttributeValueMemberS)
	kind, _ := item["kind"].(*types.AttributeValueMemberS)
	body, _ := item["body"].(*types.AttributeValueMemberB)
	if sk == nil || kind == nil || body == nil {
		return Decision{}, errors.New("decision record without key, kind or body")
	}
	var ms int64
	var rest string
	if _, err := fmt.Sscanf(sk.Value, "%015d#%s", &ms, &rest); err != nil {
		return Decision{}, fmt.Errorf("decision record %q: %w", sk.Value, err)
	}
	b, err := gunzipBytes(body.Value)
	if err != nil {
		return Decision{}, fmt.Errorf("decision record %q: %w", sk.Value, err)
	}
	id := rest
	if i := len(kind.Value) + 1; len(rest) >= i {
		id = rest[i:]
	}
	return Decision{At: time.UnixMilli(ms), Kind: kind.Value, ID: id, Body: b}, nil
}
