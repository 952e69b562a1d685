package dynalite_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/nodewright/nodewright/internal/localcloud/dynalite"
)

func TestConditionalWriteConflict(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: starts dynalite (npm)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv, err := dynalite.Start(ctx, dynalite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := srv.Endpoint()
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
		u, _ := url.Parse(endpoint)
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			t.Errorf("dynalite still listening on %s after Close", u.Host)
		}
	})

	db := dynamodb.New(dynamodb.Options{
		Region:       "us-west-2",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
	})
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("nodeclaims"),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	if err := dynamodb.NewTableExistsWaiter(db).Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String("nodeclaims")}, 30*time.Second); err != nil {
		t.Fatalf("wait for table: %v", err)
	}

	put := func(owner string) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String("nodeclaims"),
			Item: map[string]types.AttributeValue{
				"pk":    &types.AttributeValueMemberS{Value: "default-abc12"},
				"owner": &types.AttributeValueMemberS{Value: owner},
			},
			ConditionExpression: aws.String("attribute_not_exists(pk)"),
		})
		return err
	}
	if err := put("first"); err != nil {
		t.Fatalf("first conditional put: %v", err)
	}
	err = put("second")
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("second conditional put: got %v, want ConditionalCheckFailedException", err)
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String("nodeclaims"),
		Key:            map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "default-abc12"}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("get item: %v", err)
	}
	if got := out.Item["owner"].(*types.AttributeValueMemberS).Value; got != "first" {
		t.Fatalf("owner = %q after refused write, want %q", got, "first")
	}
}
