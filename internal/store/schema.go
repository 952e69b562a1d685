// Package store is nodewright's DynamoDB repository: NodeClaim records,
// leases for singleton work, the shared ICE set, price/catalog caches,
// learned allocatable and small checkpoints, all in one table.
//
// The table layout is defined once here (Schema) so the code and the CDK app
// (infra/) can never disagree about key names or indexes.
//
// Item layout (pk / sk; what else):
//
//	nodeclaim#<0..7> / <name>       NodeClaim: version, deleted, deletedAt, expiresAt (tombstones),
//	                                body (gzipped JSON); gsi1 instance#<id>, gsi2 nodepool#<pool>
//	lease / <name>                  holder, token (fencing), leaseUntil (ms), acquiredAt
//	ice / <ct>#<zone>#<type>        until (ms), reason, expiresAt (cleanup only)
//	allocatable / <type>#<variant>  capacity, allocatable (JSON), nodeName, observedAt
//	kv / <key>                      value, version, expiresAt (optional)
//	cache#<key> / head              gen, parts, size, sha256, fetchedAt
//	cache#<key> / part#<gen>#<n>    data (gzipped slice of the blob)
//
// Every write is a single-item conditional write: DynamoDB Local-compatible
// servers (dynalite) have no transactions, and none are needed.
package store

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// KeySchema names a partition key and an optional sort key. All key
// attributes of the table are strings (DynamoDB type S).
type KeySchema struct {
	PartitionKey string
	SortKey      string
}

// IndexSchema describes one global secondary index. Every GSI projects all
// attributes, so a query on it returns whole items.
type IndexSchema struct {
	Name         string
	PartitionKey string
	SortKey      string
}

// TableSchema is the single-table layout.
type TableSchema struct {
	TableKey KeySchema
	GSIs     []IndexSchema
	// TTLAttribute holds an epoch-seconds number (DynamoDB type N). DynamoDB
	// deletes items lazily after that time; readers filter them themselves.
	TTLAttribute string
}

// Attribute and index names. Items that do not take part in an index simply
// omit its key attributes (sparse indexes).
const (
	AttrPK        = "pk"
	AttrSK        = "sk"
	AttrGSI1PK    = "gsi1pk"
	AttrGSI1SK    = "gsi1sk"
	AttrGSI2PK    = "gsi2pk"
	AttrGSI2SK    = "gsi2sk"
	AttrExpiresAt = "expiresAt"

	IndexByInstance = "by-instance"
	IndexByNodePool = "by-nodepool"
)

// Schema is the table layout used by the store and deployed by the CDK app.
var Schema = TableSchema{
	TableKey: KeySchema{PartitionKey: AttrPK, SortKey: AttrSK},
	GSIs: []IndexSchema{
		{Name: IndexByInstance, PartitionKey: AttrGSI1PK, SortKey: AttrGSI1SK},
		{Name: IndexByNodePool, PartitionKey: AttrGSI2PK, SortKey: AttrGSI2SK},
	},
	TTLAttribute: AttrExpiresAt,
}

// CreateTableInput returns an on-demand CreateTable request for the schema,
// used by tests and the local cloud (the CDK app builds its own construct from
// Schema). TTL is enabled separately (UpdateTimeToLive), which dynalite lacks.
func (s TableSchema) CreateTableInput(tableName string) *dynamodb.CreateTableInput {
	attrs := map[string]bool{}
	var defs []types.AttributeDefinition
	addAttr := func(name string) {
		if name == "" || attrs[name] {
			return
		}
		attrs[name] = true
		defs = append(defs, types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: types.ScalarAttributeTypeS})
	}
	keySchema := func(pk, sk string) []types.KeySchemaElement {
		addAttr(pk)
		ks := []types.KeySchemaElement{{AttributeName: aws.String(pk), KeyType: types.KeyTypeHash}}
		if sk != "" {
			addAttr(sk)
			ks = append(ks, types.KeySchemaElement{AttributeName: aws.String(sk), KeyType: types.KeyTypeRange})
		}
		return ks
	}
	in := &dynamodb.CreateTableInput{
		TableName:   aws.String(tableName),
		BillingMode: types.BillingModePayPerRequest,
		KeySchema:   keySchema(s.TableKey.PartitionKey, s.TableKey.SortKey),
	}
	for _, g := range s.GSIs {
		in.GlobalSecondaryIndexes = append(in.GlobalSecondaryIndexes, types.GlobalSecondaryIndex{
			IndexName:  aws.String(g.Name),
			KeySchema:  keySchema(g.PartitionKey, g.SortKey),
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll},
		})
	}
	in.AttributeDefinitions = defs
	return in
}
