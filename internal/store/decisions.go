package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// A decision's gzipped body is split into items of at most
// decisionPartBytes: DynamoDB refuses items over 400 KB, names and key
// included (DynamoDB developer guide, "Service, account, and table quotas":
// item size), and shadow mode's record of a pass over a 40,000-pod cluster
// can exceed that even gzipped. Part 0 is the record's own key and carries
// the count ("parts"); parts 1.. are keys after it (decisionPartKey).
const (
	decisionPartBytes = 350 << 10
	maxDecisionParts  = 32
	attrParts         = "parts"
	attrPart          = "part"
)

func decisionPartKey(base string, i int) string { return fmt.Sprintf("%s~p%03d", base, i) }

// PutDecision writes d; it expires after DecisionTTL. The parts after the
// first are written first, so a record whose first part is visible is
// whole; a write killed half-way leaves parts no reader assembles, and they
// expire with the TTL.
func (s *Store) PutDecision(ctx context.Context, d Decision) error {
	if d.Kind == "" || d.At.IsZero() {
		return errors.New("put decision: kind and time are required")
	}
	body, err := gzipBytes(d.Body)
	if err != nil {
		return fmt.Errorf("put decision: %w", err)
	}
	chunks := splitBytes(body, decisionPartBytes)
	if len(chunks) > maxDecisionParts {
		return fmt.Errorf("put decision %s: %d bytes gzipped, over the %d parts of %d bytes a record may have", d.Kind, len(body), maxDecisionParts, decisionPartBytes)
	}
	base := decisionSortKey(d.At, d.Kind, d.ID)
	expires := nAttr(d.At.Add(DecisionTTL).Unix())
	for i := len(chunks) - 1; i >= 0; i-- {
		item := key(pkDecision, base)
		if i > 0 {
			item = key(pkDecision, decisionPartKey(base, i))
			item[attrPart] = nAttr(int64(i))
		} else if len(chunks) > 1 {
			item[attrParts] = nAttr(int64(len(chunks)))
		}
		item["kind"] = sAttr(d.Kind)
		item["body"] = &types.AttributeValueMemberB{Value: chunks[i]}
		item[AttrExpiresAt] = expires
		if _, err := s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item}); err != nil {
			return fmt.Errorf("put decision %s (part %d of %d): %w", d.Kind, i+1, len(chunks), err)
		}
	}
	return nil
}

// splitBytes cuts b into pieces of at most n bytes (one empty piece for an
// empty b).
func splitBytes(b []byte, n int) [][]byte {
	out := [][]byte{}
	for len(b) > n {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}

// ListDecisions returns the unexpired records made at or after since, oldest
// first. Records missing a part (a write that did not finish) are left out.
func (s *Store) ListDecisions(ctx context.Context, since time.Time) ([]Decision, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk >= :from"),
		ExpressionAttributeNames: map[string]string{"#pk": AttrPK, "#sk": AttrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": sAttr(pkDecision), ":from": sAttr(fmt.Sprintf("%015d", since.UnixMilli())),
		},
	}
	var items []map[string]types.AttributeValue
	if err := s.queryAll(ctx, in, func(page []map[string]types.AttributeValue) error {
		items = append(items, page...)
		return nil
	}); err != nil {
		return nil, fmt.Errorf("list decisions: %w", err)
	}
	return s.assembleDecisions(items)
}

// assembleDecisions joins each record's parts (items of one query, in key
// order) and decodes it.
func (s *Store) assembleDecisions(items []map[string]types.AttributeValue) ([]Decision, error) {
	parts := map[string][]byte{}
	for _, item := range items {
		if _, ok := item[attrPart]; !ok {
			continue
		}
		sk, _ := item[AttrSK].(*types.AttributeValueMemberS)
		body, _ := item["body"].(*types.AttributeValueMemberB)
		if sk != nil && body != nil {
			parts[sk.Value] = body.Value
		}
	}
	var out []Decision
	for _, item := range items {
		if _, ok := item[attrPart]; ok {
			continue
		}
		whole, ok := joinParts(item, parts)
		if !ok {
			continue
		}
		d, err := s.decodeDecision(whole)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list decisions: %w", err)
		}
		out = append(out, d)
	}
	return out, nil
}

// joinParts is item with the bodies of its later parts appended; false when
// one is missing.
func joinParts(item map[string]types.AttributeValue, parts map[string][]byte) (map[string]types.AttributeValue, bool) {
	n, err := numAttr(item, attrParts)
	if err != nil || n <= 1 {
		return item, true
	}
	sk, _ := item[AttrSK].(*types.AttributeValueMemberS)
	body, _ := item["body"].(*types.AttributeValueMemberB)
	if sk == nil || body == nil {
		return item, true // decodeDecision reports it
	}
	joined := append([]byte(nil), body.Value...)
	for i := 1; i < int(n); i++ {
		p, ok := parts[decisionPartKey(sk.Value, i)]
		if !ok {
			return nil, false
		}
		joined = append(joined, p...)
	}
	whole := maps.Clone(item)
	whole["body"] = &types.AttributeValueMemberB{Value: joined}
	return whole, true
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
