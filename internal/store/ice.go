package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodewright/nodewright/internal/catalog"
)

// Offering identifies one offering, the unit of Karpenter's
// unavailable-offerings (ICE) cache: catalog.OfferingKey, the key the
// solver and the launch path use too.
type Offering = catalog.OfferingKey

// ValidateOffering checks the offering can be a key: its parts non-empty and
// free of the key separator.
func ValidateOffering(o Offering) error {
	for _, p := range []string{o.InstanceType, o.Zone, o.CapacityType} {
		if p == "" || strings.Contains(p, "#") {
			return fmt.Errorf("offering %q: instance type, zone and capacity type must be non-empty and free of '#'", o.String())
		}
	}
	if strings.Contains(o.ReservationID, "#") {
		return fmt.Errorf("offering %q: the reservation id must be free of '#'", o.String())
	}
	return nil
}

// Unavailable is one entry of the shared ICE set.
type Unavailable struct {
	Offering
	Until  time.Time
	Reason string
}

// ICE items: pk "ice", sk "<capacityType>#<zone>#<type>[#<reservation>]"; "until" in
// milliseconds decides; expiresAt (an hour later) only lets DynamoDB clean up.
type iceItem struct {
	PK           string `dynamodbav:"pk"`
	SK           string `dynamodbav:"sk"`
	InstanceType string `dynamodbav:"instanceType"`
	Zone         string `dynamodbav:"zone"`
	CapacityType string `dynamodbav:"capacityType"`
	// ReservationID is absent on items written before reservations were
	// told apart; they cover every reservation of the type and zone.
	ReservationID string `dynamodbav:"reservationID,omitempty"`
	Until         int64  `dynamodbav:"until"`
	Reason        string `dynamodbav:"reason,omitempty"`
	ExpiresAt     int64  `dynamodbav:"expiresAt"`
}

// MarkUnavailable records that an offering has no capacity until the given
// time. An existing entry that lasts longer is kept (a later, shorter mark
// never shortens it), so concurrent functions cannot undo each other.
func (s *Store) MarkUnavailable(ctx context.Context, o Offering, until time.Time, reason string) error {
	if err := ValidateOffering(o); err != nil {
		return err
	}
	sk := o.CapacityType + "#" + o.Zone + "#" + o.InstanceType
	if o.ReservationID != "" {
		sk += "#" + o.ReservationID
	}
	it := iceItem{
		PK: pkICE, SK: sk, InstanceType: o.InstanceType, Zone: o.Zone, CapacityType: o.CapacityType, ReservationID: o.ReservationID,
		Until: until.UnixMilli(), Reason: reason, ExpiresAt: until.Add(time.Hour).Unix(),
	}
	av, err := attributevalue.MarshalMap(it)
	if err != nil {
		return fmt.Errorf("mark %s unavailable: %w", o, err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      av,
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #until < :until"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#until": "until"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":until": nAttr(it.Until)},
	})
	if isConditionFailed(err) {
		return nil // a longer-lasting mark is already there
	}
	if err != nil {
		return fmt.Errorf("mark %s unavailable: %w", o, err)
	}
	return nil
}

// UnavailableOfferings returns every offering still unavailable now,
// keyed by offering.
func (s *Store) UnavailableOfferings(ctx context.Context) (map[Offering]Unavailable, error) {
	now := s.now().UnixMilli()
	out := map[Offering]Unavailable{}
	err := s.queryPartition(ctx, pkICE, true, func(items []map[string]types.AttributeValue) error {
		for _, av := range items {
			var it iceItem
			if err := attributevalue.UnmarshalMap(av, &it); err != nil {
				return fmt.Errorf("decode ice item: %w", err)
			}
			if it.Until <= now {
				continue
			}
			o := Offering{InstanceType: it.InstanceType, Zone: it.Zone, CapacityType: it.CapacityType, ReservationID: it.ReservationID}
			out[o] = Unavailable{Offering: o, Until: time.UnixMilli(it.Until), Reason: it.Reason}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list unavailable offerings: %w", err)
	}
	return out, nil
}
