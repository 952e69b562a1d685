package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	corev1 "k8s.io/api/core/v1"
)

// ObservedCapacity is what a real node of an instance type reported, so the
// next launch of that type can be planned with measured rather than modelled
// allocatable. Variant separates configurations that change allocatable for
// the same type (e.g. an EC2NodeClass hash or AMI family); "" is fine.
type ObservedCapacity struct {
	InstanceType string
	Variant      string
	Capacity     corev1.ResourceList
	Allocatable  corev1.ResourceList
	NodeName     string
	ObservedAt   time.Time
}

type allocItem struct {
	PK           string `dynamodbav:"pk"`
	SK           string `dynamodbav:"sk"`
	InstanceType string `dynamodbav:"instanceType"`
	Variant      string `dynamodbav:"variant"`
	Capacity     string `dynamodbav:"capacity"`
	Allocatable  string `dynamodbav:"allocatable"`
	NodeName     string `dynamodbav:"nodeName,omitempty"`
	ObservedAt   int64  `dynamodbav:"observedAt"`
}

// RecordObservedCapacity stores an observation unless a newer one of the same
// type and variant is already stored.
func (s *Store) RecordObservedCapacity(ctx context.Context, o ObservedCapacity) error {
	if o.InstanceType == "" || strings.Contains(o.InstanceType, "#") {
		return fmt.Errorf("record observed capacity: invalid instance type %q", o.InstanceType)
	}
	if len(o.Allocatable) == 0 {
		return fmt.Errorf("record observed capacity of %s: empty allocatable", o.InstanceType)
	}
	if o.ObservedAt.IsZero() {
		o.ObservedAt = s.now()
	}
	capJSON, err := json.Marshal(o.Capacity)
	if err != nil {
		return fmt.Errorf("record observed capacity of %s: %w", o.InstanceType, err)
	}
	allocJSON, err := json.Marshal(o.Allocatable)
	if err != nil {
		return fmt.Errorf("record observed capacity of %s: %w", o.InstanceType, err)
	}
	av, err := attributevalue.MarshalMap(allocItem{
		PK: pkAllocatable, SK: o.InstanceType + "#" + o.Variant, InstanceType: o.InstanceType, Variant: o.Variant,
		Capacity: string(capJSON), Allocatable: string(allocJSON), NodeName: o.NodeName, ObservedAt: o.ObservedAt.UnixMilli(),
	})
	if err != nil {
		return fmt.Errorf("record observed capacity of %s: %w", o.InstanceType, err)
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      av,
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #t <= :t"),
		ExpressionAttributeNames:  map[string]string{"#pk": AttrPK, "#t": "observedAt"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":t": nAttr(o.ObservedAt.UnixMilli())},
	})
	if isConditionFailed(err) {
		return nil // a newer observation is stored
	}
	if err != nil {
		return fmt.Errorf("record observed capacity of %s: %w", o.InstanceType, err)
	}
	return nil
}

// ObservedCapacities returns every stored observation, sorted by type and variant.
func (s *Store) ObservedCapacities(ctx context.Context) ([]ObservedCapacity, error) {
	var out []ObservedCapacity
	err := s.queryPartition(ctx, pkAllocatable, false, func(items []map[string]types.AttributeValue) error {
		for _, av := range items {
			var it allocItem
			if err := attributevalue.UnmarshalMap(av, &it); err != nil {
				return fmt.Errorf("decode allocatable item: %w", err)
			}
			o := ObservedCapacity{InstanceType: it.InstanceType, Variant: it.Variant, NodeName: it.NodeName, ObservedAt: time.UnixMilli(it.ObservedAt)}
			if err := json.Unmarshal([]byte(it.Capacity), &o.Capacity); err != nil {
				return fmt.Errorf("decode capacity of %s: %w", it.SK, err)
			}
			if err := json.Unmarshal([]byte(it.Allocatable), &o.Allocatable); err != nil {
				return fmt.Errorf("decode allocatable of %s: %w", it.SK, err)
			}
			out = append(out, o)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list observed capacities: %w", err)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].InstanceType != out[j].InstanceType {
			return out[i].InstanceType < out[j].InstanceType
		}
		return out[i].Variant < out[j].Variant
	})
	return out, nil
}
