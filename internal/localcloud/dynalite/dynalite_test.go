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
	ctx, srv := startDynalite(t)
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
	_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
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

// A client that hangs up in the middle of a request body (a cancelled
// context) must not take the server down for everyone else.
func TestSurvivesAbortedRequest(t *testing.T) {
	ctx, srv := startDynalite(t)
	t.Cleanup(func() { srv.Close() })
	u, _ := url.Parse(srv.Endpoint())
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		// Promise a large body, send a little, then reset the connection.
		_, _ = c.Write([]byte("POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: DynamoDB_20120810.ListTables\r\n" +
			"Content-Type: application/x-amz-json-1.0\r\nContent-Length: 100000\r\n\r\n{\"Limit\":"))
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		c.Close()
	}
	time.Sleep(200 * time.Millisecond)
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-west-2",
		BaseEndpoint: aws.String(srv.Endpoint()),
		Credentials:  credentials.NewStaticCredentialsProvider("k", "s", ""),
	})
	if _, err := client.ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Fatalf("dynalite stopped serving after aborted requests: %v", err)
	}
}

// startDynalite starts a server for one test (skipped with -short); ctx
// bounds the test.
func startDynalite(t *testing.T) (context.Context, *dynalite.Server) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: starts dynalite (npm)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	srv, err := dynalite.Start(ctx, dynalite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return ctx, srv
}
