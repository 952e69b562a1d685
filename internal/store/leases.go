package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Lease is a time-bounded claim on singleton work (the provisioner or the
// disruption pass). Token is the fencing token: it increases by one on every
// acquisition and never decreases, so a holder that lost its lease while
// paused can be told apart from the current one by anyone comparing tokens.
//
// Lease items live at pk "lease", sk = name. Their expiry is the "leaseUntil"
// attribute (milliseconds), deliberately not the table's TTL attribute:
// TTL deletion would drop the item and restart the fencing token at 1.
type Lease struct {
	Name    string
	Holder  string
	Token   int64
	Expires time.Time
}

// Valid reports whether the lease is still unexpired at now.
func (l *Lease) Valid(now time.Time) bool { return l != nil && now.Before(l.Expires) }

// LeaseHeldError says who holds a lease another caller tried to acquire.
type LeaseHeldError struct {
	Name    string
	Holder  string
	Expires time.Time
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("lease %s held by %q until %s", e.Name, e.Holder, e.Expires.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

func validateLeaseArgs(name, holder string, d time.Duration) error {
	if name == "" || holder == "" {
		return fmt.Errorf("lease name %q and holder %q must both be non-empty", name, holder)
	}
	if d <= 0 {
		return fmt.Errorf("lease %s: duration %s must be positive", name, d)
	}
	return nil
}

// AcquireLease takes the named lease for holder for duration d if it is free,
// expired, or already held by the same holder. Every acquisition increments
// the fencing token, even a re-acquisition by the current holder. A lease
// held by someone else gives a *LeaseHeldError (errors.Is ErrLeaseHeld).
func (s *Store) AcquireLease(ctx context.Context, name, holder string, d time.Duration) (*Lease, error) {
	if err := validateLeaseArgs(name, holder, d); err != nil {
		return nil, err
	}
	now := s.now()
	until := now.Add(d)
	out, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 key(pkLease, name),
		UpdateExpression:    aws.String("SET #h = :h, #u = :u, #acq = :now, #tok = if_not_exists(#tok, :zero) + :one"),
		ConditionExpression: aws.String("attribute_not_exists(#pk) OR #u <= :now OR #h = :h OR #h = :empty"),
		ExpressionAttributeNames: map[string]string{
			"#pk": AttrPK, "#h": "holder", "#u": "leaseUntil", "#acq": "acquiredAt", "#tok": "token",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":h": sAttr(holder), ":u": nAttr(until.UnixMilli()), ":now": nAttr(now.UnixMilli()),
			":zero": nAttr(0), ":one": nAttr(1), ":empty": sAttr(""),
		},
		ReturnValues: types.ReturnValueAllNew,
	})
	if isConditionFailed(err) {
		cur, gerr := s.GetLease(ctx, name)
		if gerr != nil {
			// Only ErrLeaseHeld is wrapped: the failed read (possibly
			// ErrNotFound) is detail, not what the caller should match.
			return nil, fmt.Errorf("acquire lease %s: %w (holder unknown: %s)", name, ErrLeaseHeld, gerr.Error())
		}
		return nil, fmt.Errorf("acquire lease %s: %w", name, &LeaseHeldError{Name: name, Holder: cur.Holder, Expires: cur.Expires})
	}
	if err != nil {
		return nil, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	tok, err := numAttr(out.Attributes, "token")
	if err != nil {
		return nil, fmt.Errorf("acquire lease %s: %w", name, err)
	}
	return &Lease{Name: name, Holder: holder, Token: tok, Expires: time.UnixMilli(until.UnixMilli())}, nil
}

// RenewLease extends a lease the caller still holds (same holder and fencing
// token) to now+d. It succeeds even after expiry as long as nobody else
// acquired the lease meanwhile, since the token proves no other holder
// existed. Otherwise ErrLeaseLost; l.Expires is updated on success.
func (s *Store) RenewLease(ctx context.Context, l *Lease, d time.Duration) error {
	if err := validateLeaseArgs(l.Name, l.Holder, d); err != nil {
		return err
	}
	until := s.now().Add(d)
	if err := s.updateHeldLease(ctx, "renew", l, "SET #u = :u", map[string]types.AttributeValue{":u": nAttr(until.UnixMilli())}); err != nil {
		return err
	}
	l.Expires = time.UnixMilli(until.UnixMilli())
	return nil
}

// ReleaseLease gives the lease up so the next caller need not wait for
// expiry. The item (and its token) stays. Releasing a lease that was lost
// gives ErrLeaseLost and changes nothing.
func (s *Store) ReleaseLease(ctx context.Context, l *Lease) error {
	err := s.updateHeldLease(ctx, "release", l, "SET #h = :empty, #u = :zero",
		map[string]types.AttributeValue{":empty": sAttr(""), ":zero": nAttr(0)})
	if err != nil {
		return err
	}
	l.Expires = time.Time{}
	return nil
}

// updateHeldLease applies update to the lease only while l's holder still
// holds it with l's fencing token (ErrLeaseLost otherwise); values are the
// update's own placeholders. op names the operation in errors.
func (s *Store) updateHeldLease(ctx context.Context, op string, l *Lease, update string, values map[string]types.AttributeValue) error {
	values[":h"], values[":tok"] = sAttr(l.Holder), nAttr(l.Token)
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(pkLease, l.Name),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#h = :h AND #tok = :tok"),
		ExpressionAttributeNames:  map[string]string{"#h": "holder", "#u": "leaseUntil", "#tok": "token"},
		ExpressionAttributeValues: values,
	})
	if isConditionFailed(err) {
		return fmt.Errorf("%s lease %s (token %d): %w", op, l.Name, l.Token, ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("%s lease %s: %w", op, l.Name, err)
	}
	return nil
}

// GetLease reads the lease's current state (strongly consistent). A lease
// never acquired gives ErrNotFound; a released or expired one is returned
// with its holder ("" when released) and past Expires.
func (s *Store) GetLease(ctx context.Context, name string) (*Lease, error) {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(s.table), Key: key(pkLease, name), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("get lease %s: %w", name, err)
	}
	if out.Item == nil {
		return nil, fmt.Errorf("get lease %s: %w", name, ErrNotFound)
	}
	tok, err := numAttr(out.Item, "token")
	if err != nil {
		return nil, fmt.Errorf("get lease %s: %w", name, err)
	}
	until, err := numAttr(out.Item, "leaseUntil")
	if err != nil {
		return nil, fmt.Errorf("get lease %s: %w", name, err)
	}
	holder, _ := out.Item["holder"].(*types.AttributeValueMemberS)
	l := &Lease{Name: name, Token: tok, Expires: time.UnixMilli(until)}
	if holder != nil {
		l.Holder = holder.Value
	}
	return l, nil
}

func numAttr(item map[string]types.AttributeValue, name string) (int64, error) {
	n, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, errors.New("item has no numeric " + name)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s=%q: %w", name, n.Value, err)
	}
	return v, nil
}
