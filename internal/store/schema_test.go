package store

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func TestSchemaCreateTableInput(t *testing.T) {
	in := Schema.CreateTableInput("t1")
	if aws.ToString(in.TableName) != "t1" {
		t.Fatalf("table name %q", aws.ToString(in.TableName))
	}
	if len(in.KeySchema) != 2 || aws.ToString(in.KeySchema[0].AttributeName) != "pk" || aws.ToString(in.KeySchema[1].AttributeName) != "sk" {
		t.Fatalf("key schema %+v", in.KeySchema)
	}
	if len(in.GlobalSecondaryIndexes) != 2 {
		t.Fatalf("want 2 GSIs, got %d", len(in.GlobalSecondaryIndexes))
	}
	names := map[string]bool{}
	for _, g := range in.GlobalSecondaryIndexes {
		names[aws.ToString(g.IndexName)] = true
	}
	if !names["by-instance"] || !names["by-nodepool"] {
		t.Fatalf("GSIs %v", names)
	}
	// Every key attribute defined exactly once, none extra (DynamoDB rejects both).
	if len(in.AttributeDefinitions) != 6 {
		t.Fatalf("want 6 attribute definitions, got %d", len(in.AttributeDefinitions))
	}
	if Schema.TTLAttribute != "expiresAt" {
		t.Fatalf("ttl attribute %q", Schema.TTLAttribute)
	}
}
