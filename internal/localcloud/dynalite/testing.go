package dynalite

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/nodewright/nodewright/internal/store"
)

// Main is the TestMain of a package whose integration tests share one
// dynalite: it starts it (not under -short, where those tests skip through
// Client), stores its endpoint in *endpoint before any test runs, runs the
// tests, stops it and exits with the tests' code. One server per test binary
// keeps a package's start-up cost to one npm-installed node process.
func Main(m *testing.M, endpoint *string) {
	os.Exit(runTests(m, endpoint))
}

func runTests(m *testing.M, endpoint *string) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	srv, err := Start(ctx, Options{})
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: start dynalite: %v\n", filepath.Base(os.Args[0]), err)
		return 1
	}
	defer srv.Close()
	*endpoint = srv.Endpoint()
	return m.Run()
}

// Client is a DynamoDB client, with the store's retryer, for the dynalite at
// endpoint (the one Main started). It skips t under -short, where no
// dynalite runs.
func Client(t testing.TB, endpoint string) *dynamodb.Client {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs dynalite (skipped in -short)")
	}
	return store.NewDynamoDBClient(aws.Config{
		Region:      "us-west-2",
		Credentials: credentials.NewStaticCredentialsProvider("AKIDLOCAL", "local-secret", ""),
	}, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint) })
}
